"""Hand-drawn outlines of real objects in real photos of ``shared/data``: the mask benchmark's ``hand`` family.

Drawn by a person (one of this project's engineers) as polygons over 3-6x enlarged crops with a 10 px grid,
vertices at pixel centres; the outline follows what a person clicking the object means by it: the pot without
the towel it stands on, the bin with its contents and front label, the cabinet with its drawers. Judged error of
an outline: about 1 px (2 px on the blurry 320x256 overlays), so an IoU of 0.95 is about as good as these can
tell. None of these photos or objects was used to design or tune the one-click method before they were drawn.

``OUTLINES``: case name -> (source file under ``shared/data`` (a video: its first frame), the click (x, y) a
person would make, the polygon ``[(x, y), ...]`` in pixels of the source's own size).
"""
from __future__ import annotations

OUTLINES: dict[str, tuple[str, tuple[int, int], list[tuple[int, int]]]] = {
    "bridge_real_1#0/pot": ("bridge/bridge_real_1.mp4", (320, 180), [
        (244, 141), (252, 136), (260, 132), (270, 125), (280, 120), (295, 117), (312, 116), (328, 117), (340, 120),
        (350, 122), (357, 121), (366, 125), (370, 129), (369, 135), (360, 140), (359, 150), (358, 163), (354, 175),
        (350, 183), (343, 191), (335, 196), (322, 200), (310, 201), (295, 200), (280, 198), (272, 192), (267, 185),
        (263, 176), (261, 167), (260, 159), (249, 159), (245, 152), (243, 146)]),
    "bridge_real_1#0/can": ("bridge/bridge_real_1.mp4", (240, 300), [
        (184, 268), (186, 258), (193, 247), (205, 238), (220, 232), (235, 229), (250, 229), (262, 232), (272, 238),
        (280, 245), (284, 255), (286, 265), (288, 283), (289, 300), (288, 315), (285, 330), (280, 340), (270, 347),
        (257, 351), (242, 352), (228, 352), (215, 348), (205, 342), (198, 333), (196, 318), (192, 300), (188, 285)]),
    "bridge_real_1#0/eggplant": ("bridge/bridge_real_1.mp4", (415, 235), [
        (388, 236), (390, 226), (396, 218), (406, 210), (418, 204), (426, 198), (434, 195), (444, 196), (451, 208),
        (452, 220), (447, 223), (444, 232), (440, 242), (434, 252), (422, 258), (410, 258), (398, 252), (390, 244)]),
    "open_drawer_a0/bin": ("google_robot/overlays/open_drawer_a0.png", (70, 160), [
        (58, 131), (75, 130), (95, 131), (97, 135), (95, 150), (92, 170), (88, 185), (84, 191), (75, 193), (60, 193),
        (45, 193), (35, 191), (35, 183), (42, 165), (48, 150), (53, 138)]),
    "open_drawer_b0/bin": ("google_robot/overlays/open_drawer_b0.png", (45, 160), [
        (35, 130), (50, 129), (66, 130), (68, 133), (67, 145), (65, 158), (60, 175), (55, 185), (43, 190), (30, 190),
        (14, 190), (8, 183), (14, 168), (25, 148), (32, 133)]),
    "open_drawer_a2/bin": ("google_robot/overlays/open_drawer_a2.png", (108, 145), [
        (91, 114), (110, 113), (130, 114), (131, 117), (130, 135), (128, 155), (128, 170), (116, 172), (100, 172),
        (85, 170), (84, 150), (86, 135), (87, 125), (90, 117)]),
    "open_drawer_b2/bin": ("google_robot/overlays/open_drawer_b2.png", (50, 145), [
        (39, 112), (55, 112), (75, 112), (77, 115), (72, 138), (68, 155), (60, 170), (48, 171), (25, 171), (14, 160),
        (15, 155), (27, 133), (35, 117)]),
    "open_drawer_c0/cup": ("google_robot/overlays/open_drawer_c0.png", (260, 42), [
        (251, 37), (253, 30), (260, 28), (267, 31), (270, 40), (268, 49), (260, 54), (253, 50), (251, 44)]),
    "open_drawer_c0/carrot": ("google_robot/overlays/open_drawer_c0.png", (295, 32), [
        (272, 22), (268, 30), (271, 41), (285, 44), (302, 42), (315, 40), (319, 30), (315, 23), (302, 23), (285, 19),
        (276, 21)]),
    "open_drawer_a2/can": ("google_robot/overlays/open_drawer_a2.png", (31, 40), [
        (20, 28), (26, 26), (31, 25), (34, 28), (37, 35), (40, 43), (41, 48), (41, 51), (36, 53), (30, 51), (27, 45),
        (23, 38), (20, 32)]),
    "google_coke_can_real_eval_1/cabinet": ("google_robot/overlays/google_coke_can_real_eval_1.png", (160, 120), [
        (86, 45), (237, 45), (310, 187), (308, 190), (277, 197), (270, 217), (247, 227), (240, 243), (230, 256),
        (97, 256), (93, 243), (77, 230), (60, 220), (53, 197), (18, 190), (17, 187)]),
}
