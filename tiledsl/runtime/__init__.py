"""The kernel object and what runs it: `TileKernel` (kernel), its trace, tuned-config and
dispatch collaborators, configs and config spaces (config, search), the backend registry
(registry) and tiledsl's cache directory (paths, cache_files)."""
