"""Built-in dataset readers (`--data FORMAT:PATH`): layout helpers and the folder, edited and
camvid readers (readers.py), public benchmark layouts (formats.py), their registration
(plugin.py)."""
