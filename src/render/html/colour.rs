//! Theme styles as CSS. A theme names terminal colours (`cyan`, 256-colour indices, `#rrggbb`);
//! a page gets the colours xterm shows for them by default.

use ratatui::style::{Color, Modifier, Style};

/// xterm's default colours for the 16 named ones, by index.
const ANSI: [(u8, u8, u8); 16] = [
    (0x00, 0x00, 0x00),
    (0xcd, 0x00, 0x00),
    (0x00, 0xcd, 0x00),
    (0xcd, 0xcd, 0x00),
    (0x00, 0x00, 0xee),
    (0xcd, 0x00, 0xcd),
    (0x00, 0xcd, 0xcd),
    (0xe5, 0xe5, 0xe5),
    (0x7f, 0x7f, 0x7f),
    (0xff, 0x00, 0x00),
    (0x00, 0xff, 0x00),
    (0xff, 0xff, 0x00),
    (0x5c, 0x5c, 0xff),
    (0xff, 0x00, 0xff),
    (0x00, 0xff, 0xff),
    (0xff, 0xff, 0xff),
];

/// The six levels of each channel in the 256-colour cube.
const CUBE: [u8; 6] = [0, 95, 135, 175, 215, 255];

/// `#rrggbb`, or `None` for the terminal's own colour (`Reset`).
pub fn hex(color: Color) -> Option<String> {
    let (r, g, b) = match color {
        Color::Reset => return None,
        Color::Rgb(r, g, b) => (r, g, b),
        Color::Indexed(i) => indexed(i),
        Color::Black => ANSI[0],
        Color::Red => ANSI[1],
        Color::Green => ANSI[2],
        Color::Yellow => ANSI[3],
        Color::Blue => ANSI[4],
        Color::Magenta => ANSI[5],
        Color::Cyan => ANSI[6],
        Color::Gray => ANSI[7],
        Color::DarkGray => ANSI[8],
        Color::LightRed => ANSI[9],
        Color::LightGreen => ANSI[10],
        Color::LightYellow => ANSI[11],
        Color::LightBlue => ANSI[12],
        Color::LightMagenta => ANSI[13],
        Color::LightCyan => ANSI[14],
        Color::White => ANSI[15],
    };
    Some(format!("#{r:02x}{g:02x}{b:02x}"))
}

fn indexed(i: u8) -> (u8, u8, u8) {
    match i {
        0..=15 => ANSI[usize::from(i)],
        16..=231 => {
            let i = usize::from(i - 16);
            (CUBE[i / 36], CUBE[i / 6 % 6], CUBE[i % 6])
        }
        _ => {
            let level = 8 + 10 * (i - 232);
            (level, level, level)
        }
    }
}

/// The style as CSS declarations (`background:#961e2d;color:#ebebeb;font-weight:bold`): its
/// colours and the modifiers a page can show.
pub fn declarations(style: Style) -> String {
    let colours = [("background", style.bg), ("color", style.fg)];
    let mut parts: Vec<String> = colours
        .into_iter()
        .filter_map(|(property, colour)| Some(format!("{property}:{}", hex(colour?)?)))
        .collect();
    let modifiers = [
        (Modifier::BOLD, "font-weight:bold"),
        (Modifier::ITALIC, "font-style:italic"),
        (Modifier::UNDERLINED, "text-decoration:underline"),
    ];
    parts.extend(
        modifiers
            .into_iter()
            .filter(|(modifier, _)| style.add_modifier.contains(*modifier))
            .map(|(_, css)| css.to_owned()),
    );
    parts.join(";")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_indexed_and_rgb_colours_become_hex() {
        assert_eq!(hex(Color::Rgb(150, 30, 45)).unwrap(), "#961e2d");
        assert_eq!(hex(Color::Cyan).unwrap(), "#00cdcd");
        assert_eq!(hex(Color::Indexed(14)).unwrap(), "#00ffff");
        assert_eq!(hex(Color::Indexed(196)).unwrap(), "#ff0000");
        assert_eq!(hex(Color::Indexed(244)).unwrap(), "#808080");
        assert_eq!(hex(Color::Reset), None);
    }

    #[test]
    fn a_style_lists_its_colours_and_weight() {
        let style = Style::new()
            .bg(Color::Rgb(1, 2, 3))
            .fg(Color::White)
            .add_modifier(Modifier::BOLD | Modifier::ITALIC);
        assert_eq!(
            declarations(style),
            "background:#010203;color:#ffffff;font-weight:bold;font-style:italic"
        );
        assert_eq!(declarations(Style::new()), "");
    }
}
