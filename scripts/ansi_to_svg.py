#!/usr/bin/env python3
"""Turns a terminal capture with colours (`tmux capture-pane -e -p`) into an SVG picture.

    python3 scripts/ansi_to_svg.py CAPTURE.txt OUT.svg [--cols 120] [--rows 32]

Each cell keeps its character, foreground, background, bold, italic, underline and reverse.
SGR codes handled: 0, 1, 2, 3, 4, 7, 22-27, 30-37, 39, 40-47, 49, 90-97, 100-107,
38;5;N / 48;5;N (the 256-colour palette), 38;2;R;G;B / 48;2;R;G;B (24-bit). Other escape
sequences are skipped. Standard library only.
"""

import argparse
import html
import re
import sys
import unicodedata

# The 16 basic colours (xterm's defaults, a little softened) and the terminal's own defaults.
BASIC = [
    (0x00, 0x00, 0x00), (0xcd, 0x31, 0x31), (0x0d, 0xbc, 0x79), (0xe5, 0xe5, 0x10),
    (0x24, 0x72, 0xc8), (0xbc, 0x3f, 0xbc), (0x11, 0xa8, 0xcd), (0xe5, 0xe5, 0xe5),
    (0x66, 0x66, 0x66), (0xf1, 0x4c, 0x4c), (0x23, 0xd1, 0x8b), (0xf5, 0xf5, 0x43),
    (0x3b, 0x8e, 0xea), (0xd6, 0x70, 0xd6), (0x29, 0xb8, 0xdb), (0xff, 0xff, 0xff),
]
DEFAULT_FG = (0xd4, 0xd4, 0xd4)
DEFAULT_BG = (0x16, 0x16, 0x1c)

CELL_W = 8.4
CELL_H = 17.0
FONT_SIZE = 14
FONT = "'DejaVu Sans Mono', 'Menlo', 'Consolas', 'Liberation Mono', monospace"

SGR = re.compile(r"\x1b\[([0-9;:]*)m")
OTHER_ESCAPE = re.compile(r"\x1b(\[[0-9;?:]*[A-Za-z]|\][^\x07\x1b]*(\x07|\x1b\\)|[()][A-Za-z0-9]|[=>])")


def palette(n):
    """The xterm 256-colour palette."""
    if n < 16:
        return BASIC[n]
    if n < 232:
        n -= 16
        steps = [0, 95, 135, 175, 215, 255]
        return (steps[n // 36], steps[(n // 6) % 6], steps[n % 6])
    level = 8 + 10 * (n - 232)
    return (level, level, level)


class Style:
    def __init__(self):
        self.reset()

    def reset(self):
        self.fg = None
        self.bg = None
        self.bold = False
        self.dim = False
        self.italic = False
        self.underline = False
        self.reverse = False

    def copy(self):
        s = Style()
        s.__dict__.update(self.__dict__)
        return s

    def key(self):
        return (self.fg, self.bg, self.bold, self.dim, self.italic, self.underline, self.reverse)

    def apply(self, params):
        codes = [int(p) if p else 0 for p in re.split("[;:]", params)] if params else [0]
        i = 0
        while i < len(codes):
            c = codes[i]
            if c == 0:
                self.reset()
            elif c == 1:
                self.bold = True
            elif c == 2:
                self.dim = True
            elif c == 3:
                self.italic = True
            elif c == 4:
                self.underline = True
            elif c == 7:
                self.reverse = True
            elif c == 22:
                self.bold = self.dim = False
            elif c == 23:
                self.italic = False
            elif c == 24:
                self.underline = False
            elif c == 27:
                self.reverse = False
            elif 30 <= c <= 37:
                self.fg = palette(c - 30)
            elif 90 <= c <= 97:
                self.fg = palette(c - 90 + 8)
            elif c == 39:
                self.fg = None
            elif 40 <= c <= 47:
                self.bg = palette(c - 40)
            elif 100 <= c <= 107:
                self.bg = palette(c - 100 + 8)
            elif c == 49:
                self.bg = None
            elif c in (38, 48) and i + 1 < len(codes):
                colour = None
                if codes[i + 1] == 5 and i + 2 < len(codes):
                    colour = palette(codes[i + 2] % 256)
                    i += 2
                elif codes[i + 1] == 2 and i + 4 < len(codes):
                    colour = tuple(max(0, min(255, v)) for v in codes[i + 2:i + 5])
                    i += 4
                if c == 38:
                    self.fg = colour
                else:
                    self.bg = colour
            i += 1

    def colours(self):
        fg = self.fg or DEFAULT_FG
        bg = self.bg
        if self.reverse:
            fg, bg = (bg or DEFAULT_BG), fg
        if self.dim:
            base = bg or DEFAULT_BG
            fg = tuple((a + b) // 2 for a, b in zip(fg, base))
        return fg, bg


def width(ch):
    if unicodedata.combining(ch):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


def parse(text, cols, rows):
    """The screen as rows of cells: (char, style) or None for a wide char's second half."""
    screen = []
    style = Style()
    for line in text.split("\n")[:rows]:
        cells = []
        pos = 0
        while pos < len(line):
            m = SGR.match(line, pos)
            if m:
                style.apply(m.group(1))
                pos = m.end()
                continue
            m = OTHER_ESCAPE.match(line, pos)
            if m:
                pos = m.end()
                continue
            ch = line[pos]
            pos += 1
            if ch < " ":
                continue
            w = width(ch)
            if w == 0:
                if cells and cells[-1] is not None:
                    cells[-1] = (cells[-1][0] + ch, cells[-1][1])
                continue
            cells.append((ch, style.copy()))
            if w == 2:
                cells.append(None)
        cells = cells[:cols]
        screen.append(cells)
    while len(screen) < rows:
        screen.append([])
    return screen


def hexcolour(rgb):
    return "#%02x%02x%02x" % rgb


def svg(screen, cols, rows):
    w = cols * CELL_W
    h = rows * CELL_H
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w:.0f}" height="{h:.0f}" '
        f'viewBox="0 0 {w:.1f} {h:.1f}">',
        f'<rect width="100%" height="100%" fill="{hexcolour(DEFAULT_BG)}"/>',
    ]
    # Backgrounds: one rectangle per run of equal colour.
    for y, cells in enumerate(screen):
        x = 0
        while x < len(cells):
            cell = cells[x]
            bg = cell[1].colours()[1] if cell else None
            end = x + 1
            while end < len(cells) and (cells[end] is None or cells[end][1].colours()[1] == bg):
                end += 1
            if bg is not None:
                out.append(
                    f'<rect x="{x * CELL_W:.1f}" y="{y * CELL_H:.1f}" width="{(end - x) * CELL_W:.1f}" '
                    f'height="{CELL_H:.1f}" fill="{hexcolour(bg)}"/>'
                )
            x = end
    # Text: one element per run of equal style.
    out.append(
        f'<g font-family="{html.escape(FONT, quote=True)}" font-size="{FONT_SIZE}" xml:space="preserve">'
    )
    baseline = CELL_H * 0.78
    for y, cells in enumerate(screen):
        x = 0
        while x < len(cells):
            cell = cells[x]
            if cell is None:
                x += 1
                continue
            key = cell[1].key()
            end = x + 1
            while end < len(cells) and (cells[end] is None or cells[end][1].key() == key):
                end += 1
            # Every character at its own cell, so that columns line up whatever font the
            # viewer has; spaces at either end are left to the background.
            glyphs = []
            for i in range(x, end):
                if cells[i] is not None:
                    for ch in cells[i][0]:
                        glyphs.append((ch, i * CELL_W))
            while glyphs and glyphs[0][0] == " ":
                glyphs.pop(0)
            while glyphs and glyphs[-1][0] == " ":
                glyphs.pop()
            if glyphs:
                style = cell[1]
                fg = style.colours()[0]
                xs = " ".join(f"{gx:.1f}" for _, gx in glyphs)
                attrs = [f'x="{xs}"', f'y="{y * CELL_H + baseline:.1f}"', f'fill="{hexcolour(fg)}"']
                if style.bold:
                    attrs.append('font-weight="bold"')
                if style.italic:
                    attrs.append('font-style="italic"')
                if style.underline:
                    attrs.append('text-decoration="underline"')
                text = "".join(ch for ch, _ in glyphs)
                out.append(f"<text {' '.join(attrs)}>{html.escape(text, quote=False)}</text>")
            x = end
    out.append("</g>")
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("capture")
    ap.add_argument("out")
    ap.add_argument("--cols", type=int, default=120)
    ap.add_argument("--rows", type=int, default=32)
    args = ap.parse_args()
    with open(args.capture, encoding="utf-8", errors="replace") as f:
        text = f.read()
    picture = svg(parse(text, args.cols, args.rows), args.cols, args.rows)
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(picture)
    return 0


if __name__ == "__main__":
    sys.exit(main())
