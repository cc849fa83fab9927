"""ONNX Runtime adapter.

The model maps normalised images [B,3,h,w] to logits [B,C,h',w'] (upsampled here to the input
size) or to label maps [B,h',w'] (integer outputs, resized nearest; such models give no
logits). What the outputs mean and how to normalise travel in the file's `metadata_props`
under the key "segtk" (JSON, written by `save_metadata`), or are given in the spec; the spec
wins. A fixed spatial input size in the graph is honoured (images are resized to it) unless
`size=` says otherwise; a fixed batch size of 1 is run one image at a time.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from segtk.core import (
    ModelError,
    Preprocessing,
    Segmenter,
    convert,
    labels_from_logits,
    parse_options,
)

META_KEY = "segtk"
HINT = "syntax: onnx:FILE.onnx[,classes=a;b;c][,mean=R;G;B][,std=R;G;B][,scale=255][,bgr][,size=WxH]"


_NP_TYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16,
             "tensor(double)": np.float64}


class OnnxSegmenter(Segmenter):
    def __init__(self, session, prep: Preprocessing, name: str) -> None:
        if not prep.classes:
            raise ModelError(f"{name}: no class list",
                             hint="store it with segtk_onnx.save_metadata(...) or add classes=a;b;c")
        self.session = session
        self.prep = prep
        self.name = name
        self.classes = list(prep.classes)
        self._outputs = 0  # channels of the last logits (0: none yet, or label maps)
        inp = session.get_inputs()[0]
        if len(inp.shape) != 4:
            raise ModelError(f"{name}: input {inp.name!r} has shape {inp.shape}, expected [B,3,H,W]")
        if inp.type not in _NP_TYPES:
            raise ModelError(f"{name}: input {inp.name!r} is {inp.type}, expected a float tensor")
        self.input_name, self.input_dtype = inp.name, _NP_TYPES[inp.type]
        batch, channels, height, width = inp.shape
        if isinstance(channels, int) and channels != 3:
            raise ModelError(f"{name}: input takes {channels} channels, expected 3 (RGB/BGR)")
        self.fixed_batch = batch if isinstance(batch, int) else None
        if prep.size is None and isinstance(height, int) and isinstance(width, int):
            prep.size = (width, height)
        self.output_name = session.get_outputs()[0].name

    def preprocess(self, images: torch.Tensor) -> torch.Tensor:
        return self.prep.normalise(images.detach().cpu())

    def _run(self, x: torch.Tensor) -> np.ndarray:
        array = np.ascontiguousarray(x.numpy().astype(self.input_dtype, copy=False))
        step = self.fixed_batch or array.shape[0]
        if step < 1 or (self.fixed_batch and self.fixed_batch != 1 and array.shape[0] % step):
            raise ModelError(f"{self.name}: the graph has a fixed batch size of {self.fixed_batch}",
                             hint="re-export with a dynamic batch axis (dynamic_axes / dynamic_shapes)")
        outs = [self.session.run([self.output_name], {self.input_name: array[i:i + step]})[0]
                for i in range(0, array.shape[0], step)]
        return np.concatenate(outs)

    def _raw(self, images: torch.Tensor) -> torch.Tensor:
        out = torch.from_numpy(self._run(self.preprocess(images)))
        b = images.shape[0]
        if out.shape[0] != b or out.dim() not in (3, 4):
            raise ModelError(f"{self.name} returned shape {tuple(out.shape)}, expected "
                             f"[{b},C,h,w] logits or [{b},h,w] labels")
        if out.dim() == 4:
            self._outputs = int(out.shape[1])
        return out

    @property
    def num_outputs(self) -> int:
        """The channels of its last logits (a file may have outputs past its classes, e.g. a
        void channel); the classes before the first, and for a graph that outputs labels."""
        return self._outputs or self.num_classes

    def logits(self, images: torch.Tensor) -> torch.Tensor:
        out = self._raw(images)
        if out.dim() == 3 or not out.is_floating_point():
            raise ModelError(f"{self.name} outputs label maps, not scores")
        return self._resize_logits(out.float(), images)

    @staticmethod
    def _resize_logits(out: torch.Tensor, images: torch.Tensor) -> torch.Tensor:
        h, w = images.shape[-2:]
        if out.shape[-2:] != (h, w):
            out = F.interpolate(out, size=(h, w), mode="bilinear", align_corners=False)
        return out.to(images.device)

    def predict(self, images: torch.Tensor) -> torch.Tensor:
        if images.shape[0] == 0:
            return torch.empty(0, *images.shape[2:], dtype=torch.long)
        out = self._raw(images)
        if out.dim() == 4:
            if not out.is_floating_point():
                raise ModelError(f"{self.name}: 4-D output of type {out.dtype}, expected float logits")
            return labels_from_logits(self._resize_logits(out.float(), images))
        if out.is_floating_point():
            out = out.round()
        out = out.long()
        h, w = images.shape[-2:]
        if out.shape[-2:] != (h, w):
            out = F.interpolate(out[:, None].float(), size=(h, w), mode="nearest")[:, 0].long()
        return out.to(images.device)


def parse(arg: str) -> tuple[Path, dict[str, object], int | None]:
    """'m.onnx,classes=a;b,bgr' -> (Path('m.onnx'), {'classes': [...], 'bgr': True}, threads)."""
    path_str, *options = [part.strip() for part in arg.split(",")] if arg else [""]
    if not path_str:
        raise ModelError("no ONNX file given", hint=HINT)
    override, own = parse_options(options, "onnx", HINT, extra=("threads",))
    threads = convert(own["threads"], int, "threads", error=ModelError, hint=HINT) \
        if "threads" in own else None
    if threads is not None and threads < 0:
        raise ModelError(f"threads must be 0 (all cores) or more, got {threads}", hint=HINT)
    return Path(path_str), override, threads or None


def load(arg: str) -> OnnxSegmenter:
    import onnxruntime as ort

    path, override, threads = parse(arg)
    if not path.is_file():
        raise ModelError(f"{path}: ONNX file not found", hint=HINT)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads or torch.get_num_threads()
    options.inter_op_num_threads = 1
    try:
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # ORT raises its own Fail/InvalidGraph/... types
        raise ModelError(f"{path}: not a loadable ONNX model ({type(exc).__name__}: {exc})",
                         hint="export with torch.onnx.export (opset >= 17) and check it with onnx.checker") from exc
    meta = session.get_modelmeta().custom_metadata_map
    try:
        prep = Preprocessing.from_json(meta[META_KEY]) if META_KEY in meta else Preprocessing()
    except (ValueError, TypeError) as exc:
        raise ModelError(f"{path}: bad 'segtk' metadata ({exc})",
                         hint="rewrite it with segtk_onnx.save_metadata(path, Preprocessing(...))") from exc
    for key, value in override.items():
        setattr(prep, key, value)
    return OnnxSegmenter(session, prep, f"onnx:{path.name}")


def save_metadata(path: str | Path, prep: Preprocessing, out: str | Path | None = None) -> None:
    """Store `prep` in the model's metadata_props (key "segtk"); needs the `onnx` package."""
    import onnx

    model = onnx.load(str(path))
    for prop in list(model.metadata_props):
        if prop.key == META_KEY:
            model.metadata_props.remove(prop)
    entry = model.metadata_props.add()
    entry.key, entry.value = META_KEY, prep.to_json()
    onnx.save(model, str(out or path))
