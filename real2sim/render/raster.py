"""Triangle rasterisation to per-pixel face id, barycentrics and depth (the "rasterize" of rasterize -> interpolate -> texture).

The interface follows nvdiffrast: :func:`rasterize_clip` takes clip-space vertex
positions ``(n, 4)`` and triangles, and returns :class:`Fragments`. :func:`rasterize`
is the camera front end: world vertices + a :class:`real2sim.core.camera.Camera` (OpenCV).

Backends (registry :data:`BACKENDS`):

* ``"gl"``: headless OpenGL 3.3 through moderngl + EGL (Mesa llvmpipe on CPU, a GPU
  driver where there is one).
* ``"numpy"``: an exact, slow pure-numpy fallback for machines without GL.

Both use the same conventions, tested to agree: pixel centres in the OpenCV
convention (top-left pixel centre at (0, 0); clip/NDC x = -1 is the left image edge,
y = -1 the *top* edge, so image rows come out top-first without a flip), perspective-
correct barycentrics, ``depth`` = the interpolated clip ``w`` (for a camera: metric
depth along +Z), ``face_id = -1`` and ``depth = inf`` where nothing was drawn. Faces
are not culled (but by :func:`coverage_clip`'s ``one_side``, on GL). Faces crossing
the near plane are clipped by GL and dropped whole by the numpy backend (the only
place they may differ).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable

import numpy as np

from real2sim.core.camera import Camera
from real2sim.core.errors import RasterError, UnknownNameError
from real2sim.core.geometry import transform_points

log = logging.getLogger(__name__)


@dataclass
class Fragments:
    """Per-pixel output of a rasteriser."""

    face_id: np.ndarray
    """``(h, w) int32`` index of the visible face, -1 where empty."""
    bary: np.ndarray
    """``(h, w, 3) float32`` perspective-correct barycentrics of the visible face (0 where empty)."""
    depth: np.ndarray
    """``(h, w) float32`` interpolated clip w (camera depth in metres), inf where empty."""

    @property
    def mask(self) -> np.ndarray:
        """``(h, w) bool`` pixels covered by some face."""
        return self.face_id >= 0


def camera_clip(camera: Camera, vertices_world) -> np.ndarray:
    """World vertices ``(n, 3)`` -> clip coordinates ``(n, 4)`` for ``camera`` (see the module docstring)."""
    pc = transform_points(np.linalg.inv(camera.T_world_camera), np.asarray(vertices_world, float))
    X, Y, Z = pc[:, 0], pc[:, 1], pc[:, 2]
    w, h, n, f = camera.width, camera.height, camera.near, camera.far
    clip = np.empty((len(pc), 4))
    clip[:, 0] = 2 * camera.fx / w * X + (2 * (camera.cx + 0.5) / w - 1) * Z
    clip[:, 1] = 2 * camera.fy / h * Y + (2 * (camera.cy + 0.5) / h - 1) * Z
    clip[:, 2] = (f + n) / (f - n) * Z - 2 * f * n / (f - n)
    clip[:, 3] = Z
    return clip


def uv_clip(uv) -> np.ndarray:
    """Texture coordinates ``(n, 2)`` (OBJ convention, v up) -> clip coordinates that rasterise into a texture
    image whose row 0 is the top (v = 1). Texel (i, j) has its centre at u = (j + 0.5) / W, v = 1 - (i + 0.5) / H."""
    uv = np.asarray(uv, float)
    return np.stack([2 * uv[:, 0] - 1, 1 - 2 * uv[:, 1], np.zeros(len(uv)), np.ones(len(uv))], 1)


# -- numpy backend ---------------------------------------------------------------------------------------
def _raster_numpy(clip: np.ndarray, faces: np.ndarray, width: int, height: int) -> Fragments:
    face_id = np.full((height, width), -1, np.int32)
    bary = np.zeros((height, width, 3), np.float32)
    depth = np.full((height, width), np.inf, np.float64)
    zbuf = np.full((height, width), np.inf, np.float64)
    w = clip[:, 3]
    safe_w = np.where(np.abs(w) > 1e-12, w, 1e-12)
    px = (clip[:, 0] / safe_w + 1) / 2 * width - 0.5
    py = (clip[:, 1] / safe_w + 1) / 2 * height - 0.5
    zn = clip[:, 2] / safe_w
    faces = np.asarray(faces, np.int64)
    for fi, f in enumerate(faces):
        if (w[f] <= 1e-9).any() or (zn[f] < -1).any():  # behind the eye or crossing the near plane: dropped
            continue
        if (zn[f] > 1).all():
            continue
        xa, ya = px[f], py[f]
        x0, x1 = int(max(np.ceil(xa.min()), 0)), int(min(np.floor(xa.max()), width - 1))
        y0, y1 = int(max(np.ceil(ya.min()), 0)), int(min(np.floor(ya.max()), height - 1))
        if x1 < x0 or y1 < y0:
            continue
        d = (ya[1] - ya[2]) * (xa[0] - xa[2]) + (xa[2] - xa[1]) * (ya[0] - ya[2])
        if abs(d) < 1e-14:
            continue
        ys, xs = np.mgrid[y0:y1 + 1, x0:x1 + 1]
        xs, ys = xs.ravel().astype(float), ys.ravel().astype(float)
        l0 = ((ya[1] - ya[2]) * (xs - xa[2]) + (xa[2] - xa[1]) * (ys - ya[2])) / d
        l1 = ((ya[2] - ya[0]) * (xs - xa[2]) + (xa[0] - xa[2]) * (ys - ya[2])) / d
        l2 = 1 - l0 - l1
        inside = (l0 >= 0) & (l1 >= 0) & (l2 >= 0)
        if not inside.any():
            continue
        l = np.stack([l0[inside], l1[inside], l2[inside]], 1)
        z = l @ zn[f]
        pw = l / w[f]  # perspective correction
        s = pw.sum(1, keepdims=True)
        pb = pw / s
        dep = 1.0 / s[:, 0]
        yi, xi = ys[inside].astype(int), xs[inside].astype(int)
        keep = (z < zbuf[yi, xi]) & (z <= 1)
        yi, xi = yi[keep], xi[keep]
        zbuf[yi, xi] = z[keep]
        face_id[yi, xi] = fi
        bary[yi, xi] = pb[keep]
        depth[yi, xi] = dep[keep]
    return Fragments(face_id, bary, depth.astype(np.float32))


# -- moderngl / EGL backend ------------------------------------------------------------------------------
_VS = """
#version 330
in vec4 in_pos;
in vec2 in_bary;
out vec2 v_bary;
out float v_w;
void main() { gl_Position = in_pos; v_bary = in_bary; v_w = in_pos.w; }
"""
_VS_COVER = """
#version 330
in vec4 in_pos;
void main() { gl_Position = in_pos; }
"""
_FS_COVER = """
#version 330
layout(location = 0) out float out_cover;
void main() { out_cover = 1.0; }
"""
_FS = """
#version 330
in vec2 v_bary;
in float v_w;
layout(location = 0) out vec4 out_bw;
layout(location = 1) out int out_id;
void main() { out_bw = vec4(v_bary, v_w, 1.0); out_id = gl_PrimitiveID + 1; }
"""


class GLRasterizer:
    """moderngl + EGL rasteriser. One standalone context per instance; framebuffers cached per size."""

    def __init__(self):
        try:
            import moderngl
        except ImportError as exc:
            raise RasterError(f"the 'gl' rasteriser needs moderngl ({exc}); pip install moderngl, "
                              "or use backend='numpy'") from exc
        try:
            self.ctx = moderngl.create_standalone_context(backend="egl")
        except Exception as exc:  # moderngl raises plain Exception for EGL failures
            raise RasterError(f"no headless OpenGL (EGL) context: {exc}. Install Mesa EGL (libegl1, libgl1-mesa-dri) "
                              "or use backend='numpy'") from exc
        self._mgl = moderngl
        self.prog = self.ctx.program(vertex_shader=_VS, fragment_shader=_FS)
        self.cov_prog = self.ctx.program(vertex_shader=_VS_COVER, fragment_shader=_FS_COVER)
        self._cov_key, self._cov_ibo, self._cov_faces = None, None, None
        self._fbos: dict[tuple[int, int], object] = {}
        self._cov_fbos: dict[tuple[int, int], object] = {}
        self.renderer = self.ctx.info.get("GL_RENDERER", "?")

    def _fbo(self, width: int, height: int):
        key = (width, height)
        if key not in self._fbos:
            ctx = self.ctx
            col = ctx.texture((width, height), 4, dtype="f4")
            ids = ctx.texture((width, height), 1, dtype="i4")
            dep = ctx.depth_renderbuffer((width, height))
            self._fbos[key] = ctx.framebuffer(color_attachments=[col, ids], depth_attachment=dep)
        return self._fbos[key]

    def _cov_fbo(self, width: int, height: int):
        """This size's coverage framebuffer: one 8-bit channel (a fifth of the bytes to fill, clear and read back
        of the face-id and barycentric targets :meth:`_fbo` holds)."""
        key = (width, height)
        if key not in self._cov_fbos:
            self._cov_fbos[key] = self.ctx.framebuffer(color_attachments=[self.ctx.texture((width, height), 1, dtype="f1")])
        return self._cov_fbos[key]

    def __call__(self, clip: np.ndarray, faces: np.ndarray, width: int, height: int) -> Fragments:
        # Other GL users in the process (MuJoCo's renderer, SAPIEN) switch the current context:
        # make ours current for the call and restore theirs afterwards.
        with self.ctx:
            return self._draw(clip, faces, width, height)

    def coverage(self, clip: np.ndarray, faces: np.ndarray, width: int, height: int, one_side: bool = False
                 ) -> np.ndarray:
        """``(h, w) bool`` pixels covered by some face (``one_side``: by some face turned towards the camera;
        see :func:`coverage_clip`). For fitting loops that draw the same triangles many times: indexed
        drawing (the index buffer is kept while ``faces`` is the same array), no barycentrics, and only the
        coverage is read back."""
        ctx = self.ctx
        with ctx:
            key = (faces.__array_interface__["data"][0], faces.shape)
            if self._cov_key != key:
                if self._cov_ibo is not None:
                    self._cov_ibo.release()
                self._cov_ibo = ctx.buffer(np.ascontiguousarray(faces, np.int32).tobytes())
                self._cov_key, self._cov_faces = key, faces  # the array is kept alive: its address stays its own
            vbo = ctx.buffer(np.ascontiguousarray(clip, np.float32).tobytes())
            vao = ctx.vertex_array(self.cov_prog, [(vbo, "4f", "in_pos")], index_buffer=self._cov_ibo, index_element_size=4)
            try:
                fbo = self._draw_vao(vao, width, height, depth=False, cull=one_side, fbo=self._cov_fbo(width, height))
                cover = np.frombuffer(fbo.read(components=1, dtype="f1"), np.uint8)
            finally:
                vao.release()
                vbo.release()
        return cover.reshape(height, width) > 0

    def _draw_vao(self, vao, width: int, height: int, depth: bool, cull: bool = False, fbo=None):
        """Clear ``fbo`` (default: this size's :meth:`_fbo`) and draw ``vao``'s triangles into it (the depth test
        when ``depth``; the faces turned away from the camera culled when ``cull``); returns the framebuffer."""
        mgl, ctx = self._mgl, self.ctx
        fbo = self._fbo(width, height) if fbo is None else fbo
        fbo.use()
        ctx.viewport = (0, 0, width, height)
        (ctx.enable if depth else ctx.disable)(mgl.DEPTH_TEST)
        if cull:
            ctx.enable(mgl.CULL_FACE)
            ctx.cull_face = "front"  # GL's front (counter-clockwise in its window) faces away from our camera
        else:
            ctx.disable(mgl.CULL_FACE)
        fbo.clear(0.0, 0.0, 0.0, 0.0, depth=1.0)
        vao.render(mgl.TRIANGLES)
        return fbo

    def _render(self, clip: np.ndarray, faces: np.ndarray, width: int, height: int):
        """Draw; returns (barycentrics and w ``(h, w, 4)``, face ids ``(h, w)``)."""
        ctx = self.ctx
        pos = np.ascontiguousarray(clip[faces.ravel()], dtype=np.float32)
        bary = np.tile(np.array([[1, 0], [0, 1], [0, 0]], np.float32), (len(faces), 1))
        vbo_p, vbo_b = ctx.buffer(pos.tobytes()), ctx.buffer(bary.tobytes())
        vao = ctx.vertex_array(self.prog, [(vbo_p, "4f", "in_pos"), (vbo_b, "2f", "in_bary")])
        try:
            fbo = self._draw_vao(vao, width, height, depth=True)
            fid = np.frombuffer(fbo.read(components=1, attachment=1, dtype="i4"), np.int32).reshape(height, width) - 1
            bw = np.frombuffer(fbo.read(components=4, attachment=0, dtype="f4"), np.float32).reshape(height, width, 4)
            return bw, fid
        finally:
            vao.release()
            vbo_p.release()
            vbo_b.release()

    def _draw(self, clip: np.ndarray, faces: np.ndarray, width: int, height: int) -> Fragments:
        faces = np.asarray(faces, np.int64)
        if len(faces) == 0:
            return Fragments(np.full((height, width), -1, np.int32), np.zeros((height, width, 3), np.float32),
                             np.full((height, width), np.inf, np.float32))
        bw, fid = self._render(clip, faces, width, height)
        hit = fid >= 0
        b = np.zeros((height, width, 3), np.float32)
        b[..., :2] = bw[..., :2]
        b[..., 2] = np.where(hit, 1 - bw[..., 0] - bw[..., 1], 0)
        depth = np.where(hit, bw[..., 2], np.inf).astype(np.float32)
        return Fragments(fid.astype(np.int32), b, depth)


_GL: GLRasterizer | None = None
_GL_FAILED: str | None = None


def _gl() -> GLRasterizer:
    """The process's GL rasteriser (made on first use; a failure is remembered)."""
    global _GL, _GL_FAILED
    if _GL is None:
        if _GL_FAILED:
            raise RasterError(_GL_FAILED)
        try:
            _GL = GLRasterizer()
            log.info("GL rasteriser: %s", _GL.renderer)
        except RasterError as exc:
            _GL_FAILED = str(exc)
            raise
    return _GL


def _raster_gl(clip, faces, width, height) -> Fragments:
    return _gl()(clip, faces, width, height)


BACKENDS: dict[str, Callable[..., Fragments]] = {"gl": _raster_gl, "numpy": _raster_numpy}
"""Rasteriser registry: name -> fn(clip (n, 4), faces (m, 3), width, height) -> Fragments. A GPU backend
(e.g. nvdiffrast, where it installs) registers here."""


def available_backends() -> list[str]:
    out = []
    for name in BACKENDS:
        try:
            BACKENDS[name](np.zeros((3, 4)) + [0, 0, 0, 1], np.zeros((1, 3), int), 2, 2)
            out.append(name)
        except RasterError:
            pass
    return out


def resolve_backend(name: str = "auto") -> str:
    """'auto' -> 'gl' when an EGL context can be made, else 'numpy' (logged)."""
    if name != "auto":
        if name not in BACKENDS:

            raise UnknownNameError("rasteriser backend", name, BACKENDS)
        return name
    try:
        _raster_gl(np.array([[0, 0, 0, 1.0]] * 3), np.zeros((1, 3), int), 2, 2)
        return "gl"
    except RasterError as exc:
        log.warning("GL rasteriser unavailable (%s); using the slow numpy fallback", exc)
        return "numpy"


def rasterize_clip(clip, faces, width: int, height: int, backend: str = "auto") -> Fragments:
    """Rasterise triangles given in clip space (nvdiffrast-style). See the module docstring for conventions."""
    clip = np.asarray(clip, float)
    if clip.ndim != 2 or clip.shape[1] != 4:
        raise RasterError(f"clip positions must be (n, 4), got {clip.shape}")
    if not np.isfinite(clip).all():
        raise RasterError("clip positions contain NaN or inf")
    return BACKENDS[resolve_backend(backend)](clip, np.asarray(faces, np.int64), int(width), int(height))


def coverage_clip(clip, faces, width: int, height: int, backend: str = "auto", one_side: bool = False) -> np.ndarray:
    """``(h, w) bool`` pixels covered by the triangles (clip space): :func:`rasterize_clip`'s mask, faster on GL.
    ``one_side``: on GL, draw only the faces turned towards the camera (wound counter-clockwise seen from it, as
    an engine shows them): a closed mesh's silhouette is theirs alone, at about 70 % of the cost (the caller checks
    that its meshes are closed; :class:`render.robot.RobotSilhouette` does)."""
    faces = np.asarray(faces, np.int64)
    if backend in ("auto", "gl") and _GL is not None and len(faces):  # resolve_backend test-draws on every call
        return _GL.coverage(np.asarray(clip, float), faces, int(width), int(height), one_side)
    name = resolve_backend(backend)
    if name == "gl" and len(faces):
        return _gl().coverage(np.asarray(clip, float), faces, int(width), int(height), one_side)
    return rasterize_clip(clip, faces, width, height, name).mask


def rasterize(camera: Camera, vertices_world, faces, backend: str = "auto") -> Fragments:
    """Rasterise a world-space mesh into ``camera`` (OpenCV pinhole, no distortion)."""
    return rasterize_clip(camera_clip(camera, vertices_world), faces, camera.width, camera.height, backend)


def rasterize_uv(uv, face_uv, size: int, backend: str = "auto") -> Fragments:
    """Rasterise the UV layout into a ``size x size`` texture image (row 0 = v 1): which face and where each texel is."""
    return rasterize_clip(uv_clip(uv), face_uv, size, size, backend)
