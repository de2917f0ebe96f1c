"""Framework integrations: PyTorch custom ops (torch_op), Lightning Thunder (thunder), DLPack
arrays from any library (arrays), and ahead-of-time kernel packages (export writes them, aot
loads them, package_check and cubin check them before anything reaches a GPU)."""
