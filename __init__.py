"""segtk: stress-test semantic segmentation models before they ship."""

__version__ = "0.1.0"
