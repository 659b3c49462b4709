"""Object meshes from photos: visual hull (masks + board poses) or TSDF fusion (RGB-D), open3d cleanup, metrics.

The stage package holds the geometry; ``real2sim.pipeline.scan`` runs a whole scan (board poses from the capture
stage, texture and collision from theirs)."""
