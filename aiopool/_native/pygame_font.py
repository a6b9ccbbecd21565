"""The glyph table with which CarRacing's C++ env draws its score exactly as gymnasium's does.

gymnasium's CarRacing writes ``f"{reward:04.0f}"`` on every frame with
``pygame.font.Font(pygame.font.get_default_font(), 42).render(text, True, white, black)``.
pygame_draw.h's ``Glyphs`` composes such a text as SDL_ttf does (HarfBuzz pen positions in
1/64 pixel, each glyph's 8-bit bitmap OR-ed in), from this table: per character, the bitmap
pygame renders for it alone, its left bearing and advance, and the font's pair kerning
(``kern`` table, read with fontTools and scaled as HarfBuzz scales it). It is built once per
process from the installed pygame's own font, so frames match that pygame's.
"""

from __future__ import annotations

import functools
import os
import struct
from typing import Any

CHARS = "0123456789-"  # what f"{reward:04.0f}" writes for a finite reward


@functools.cache
def glyph_table(size: int = 42, chars: str = CHARS) -> bytes:
    """The table (pygame_draw.h's layout, little-endian): ``b"PGG1"``, the text's height, the
    number of characters, 256 palette colours (RGB), then per character its code, advance
    (26.6), left bearing, width and its width x height palette indices (row-major); then
    count x count pair kernings (26.6)."""
    try:
        import numpy as np
        import pygame
        from fontTools.ttLib import TTFont  # type: ignore[import-untyped]
    except ImportError as e:
        raise ImportError("CarRacing-v3 draws its observation's score with pygame's font, as "
                          "gymnasium does: pip install pygame-ce fonttools (or aiopool's "
                          "render extra)") from e

    pygame.font.init()
    name = pygame.font.get_default_font()
    font = pygame.font.Font(name, size)
    path = name if os.path.exists(name) else os.path.join(os.path.dirname(pygame.__file__), name)
    tt: Any = TTFont(path)
    if "GPOS" in tt:
        raise NotImplementedError(f"{path}: fonts kerned by GPOS tables are not handled")

    # HarfBuzz (hb_ft) scales font units by (x_scale << 16) // upem, x_scale from FreeType's
    # FT_DivFix(size * 64, upem) (72 dpi), and rounds (v * mult + 32768) >> 16.
    upem = tt["head"].unitsPerEm
    ft_x_scale = ((size * 64 << 16) + upem // 2) // upem
    hb_x_scale = (ft_x_scale * upem + (1 << 15)) >> 16
    mult = (hb_x_scale << 16) // upem
    cmap = tt.getBestCmap()
    pairs: dict[tuple[str, str], int] = {}
    if "kern" in tt:
        for sub in tt["kern"].kernTables:
            if getattr(sub, "coverage", 1) & 1 and hasattr(sub, "kernTable"):
                pairs.update(sub.kernTable)

    height = 0
    palette = b""
    parts = []
    for c in chars:
        metrics: Any = font.metrics(c)
        ((minx, maxx, _, _, advance),) = metrics
        surf = font.render(c, True, (255, 255, 255), (0, 0, 0))
        index = pygame.surfarray.array2d(surf).T.astype(np.uint8)  # rows x columns
        if not height:
            height = surf.get_height()
            palette = bytes(v for rgba in surf.get_palette() for v in tuple(rgba)[:3])
        if surf.get_height() != height or surf.get_bitsize() != 8:
            raise RuntimeError(f"pygame rendered {c!r} unlike the other characters")
        x0 = max(0, -minx) + minx
        bitmap = index[:, x0:x0 + (maxx - minx)]
        parts.append(struct.pack("<4i", ord(c), advance * 64, minx, maxx - minx))
        parts.append(np.ascontiguousarray(bitmap).tobytes())
    for a in chars:
        for b in chars:
            v = pairs.get((cmap.get(ord(a)), cmap.get(ord(b))), 0)
            parts.append(struct.pack("<i", (v * mult + 32768) >> 16))
    return b"PGG1" + struct.pack("<II", height, len(chars)) + palette + b"".join(parts)
