"""DiffusionGemma in this process: loading (`load`), the generation worker (`engine`), the
`diffusion-local` backend (`local`), checkpoint facts (`info`) and a tiny random test model (`tiny`).

Importing this package is free: torch and transformers are imported inside the modules' functions.
"""
