//! A sweep's grid: parameters and the values each takes, every combination of them a cell run
//! on the same seeds. `samplab sweep --grid` and the playground's sweep dialog read and check a
//! grid here, so that both take the same text and refuse it with the same words.

use super::{ParamError, SamplingParams, field_named};
use indexmap::IndexMap;
use serde::Serialize;

/// A cell's values of the grid, by key in the axes' order.
pub type CellValues = IndexMap<String, serde_json::Value>;

/// More cells than this is a typo more often than a plan, and hours of runs.
pub const MAX_CELLS: usize = 1024;

/// One axis of the grid: a parameter and the values it takes, as typed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Axis {
    pub key: String,
    pub values: Vec<String>,
}

/// What is wrong with a grid. The errors about one axis start with it, so that the CLI can put
/// its flag in front (`--grid top_p=7: …`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GridError {
    #[error(
        "the grid is empty: give KEY=V1,V2,... for each parameter (e.g. temperature=0.5,1.0 \
         top_p=0.9,1)"
    )]
    Empty,
    #[error("{0}: expected KEY=V1,V2,... (e.g. temperature=0.5,1.0)")]
    Shape(String),
    #[error("{0}: a value is empty; give values between the commas")]
    EmptyValue(String),
    #[error("{0} is given twice: list all its values in one KEY=V1,V2,...")]
    Twice(String),
    #[error(
        "the grid has {0} cells, more than the {MAX_CELLS} a sweep runs: sweep fewer values at \
         once"
    )]
    TooManyCells(usize),
    #[error("{0}")]
    UnknownKey(ParamError),
    #[error("{key}={value}: {error}")]
    BadValue {
        key: String,
        value: String,
        error: ParamError,
    },
    /// Each value is valid alone but a cell's combination is not (e.g. against the base).
    #[error("cell {cell}: {error}")]
    BadCell { cell: String, error: ParamError },
}

impl GridError {
    /// Whether the error is about one axis as typed, rather than the whole grid.
    pub fn names_an_axis(&self) -> bool {
        !matches!(
            self,
            GridError::Empty | GridError::TooManyCells(_) | GridError::BadCell { .. }
        )
    }
}

/// `temperature=0.5,0.8 top_p=0.9,1` or `temperature=0.5,0.8; top_p=0.9,1`: axes separated by
/// spaces or `;` outside brackets and quotes, each read by [`parse_axis`].
pub fn parse_grid(text: &str) -> Result<Vec<Axis>, GridError> {
    let axes = split_outside(text, |c| c == ';' || c.is_whitespace())
        .into_iter()
        .filter(|axis| !axis.trim().is_empty())
        .map(|axis| parse_axis(&axis))
        .collect::<Result<Vec<_>, _>>()?;
    if axes.is_empty() {
        return Err(GridError::Empty);
    }
    Ok(axes)
}

/// `temperature=0.5,0.8`: the key and its values, split at commas outside brackets and quotes.
pub fn parse_axis(axis: &str) -> Result<Axis, GridError> {
    let (key, values) = axis
        .split_once('=')
        .ok_or_else(|| GridError::Shape(axis.to_owned()))?;
    let values: Vec<String> = split_outside(values, |c| c == ',')
        .into_iter()
        .map(|v| v.trim().to_owned())
        .collect();
    if values.iter().any(String::is_empty) {
        return Err(GridError::EmptyValue(axis.to_owned()));
    }
    Ok(Axis {
        key: key.trim().to_owned(),
        values,
    })
}

/// `text` cut at each character `is_separator` takes that is outside brackets, braces and
/// quotes (a value may be a list, or a quoted string with commas in it).
fn split_outside(text: &str, is_separator: impl Fn(char) -> bool) -> Vec<String> {
    let mut parts = Vec::new();
    let (mut depth, mut quote, mut current) = (0i32, None, String::new());
    for c in text.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (None, '"' | '\'') => quote = Some(c),
            (None, '[' | '{') => depth += 1,
            (None, ']' | '}') => depth -= 1,
            (None, c) if depth == 0 && is_separator(c) => {
                parts.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    parts.push(current);
    parts
}

/// Every combination of the axes' values on top of `base`, the first axis varying slowest;
/// each value is checked as `--set` checks it, and a key may have one axis only.
pub fn cells(
    base: &SamplingParams,
    axes: &[Axis],
) -> Result<Vec<(CellValues, SamplingParams)>, GridError> {
    for (i, axis) in axes.iter().enumerate() {
        if axes[..i].iter().any(|a| a.key == axis.key) {
            return Err(GridError::Twice(axis.key.clone()));
        }
    }
    let count = axes
        .iter()
        .fold(1usize, |n, a| n.saturating_mul(a.values.len()));
    if count > MAX_CELLS {
        return Err(GridError::TooManyCells(count));
    }
    let mut cells = vec![(CellValues::new(), base.clone())];
    for axis in axes {
        let field = field_named(&axis.key).map_err(GridError::UnknownKey)?;
        let mut next = Vec::new();
        for (grid, params) in &cells {
            for value in &axis.values {
                let bad = |error| GridError::BadValue {
                    key: axis.key.clone(),
                    value: value.clone(),
                    error,
                };
                let mut params = params.clone();
                params.set_text(&axis.key, value).map_err(bad)?;
                let shown = serde_json::to_value(params.get(field))
                    .map_err(|e| bad(ParamError::Syntax(e.to_string())))?;
                let mut grid = grid.clone();
                grid.insert(axis.key.clone(), shown);
                next.push((grid, params));
            }
        }
        cells = next;
    }
    for (grid, params) in &cells {
        params.validate().map_err(|error| GridError::BadCell {
            cell: describe(grid),
            error,
        })?;
    }
    Ok(cells)
}

/// `temperature=0.5 top_p=0.9`.
pub fn describe(grid: &CellValues) -> String {
    let pairs: Vec<String> = grid.iter().map(|(k, v)| format!("{k}={v}")).collect();
    pairs.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_split_at_top_level_commas_only() {
        let axis = parse_axis(r#"stop=["a,b"],"x,y",#3"#).unwrap();
        assert_eq!(axis.key, "stop");
        assert_eq!(axis.values, [r#"["a,b"]"#, r#""x,y""#, "#3"]);
        assert_eq!(
            parse_axis("temperature"),
            Err(GridError::Shape("temperature".into()))
        );
        assert!(matches!(
            parse_axis("temperature=0.5,,1"),
            Err(GridError::EmptyValue(_))
        ));
    }

    #[test]
    fn a_grid_splits_into_axes_at_spaces_and_semicolons_outside_quotes() {
        let axes = parse_grid(r#" temperature=0.5,1;top_k=5  stop=["a b"],"c; d" "#).unwrap();
        let keys: Vec<&str> = axes.iter().map(|a| a.key.as_str()).collect();
        assert_eq!(keys, ["temperature", "top_k", "stop"]);
        assert_eq!(axes[2].values, [r#"["a b"]"#, r#""c; d""#]);
        assert_eq!(parse_grid("  ; "), Err(GridError::Empty));
        // A space ends an axis: the comma before it leaves an empty value.
        assert_eq!(
            parse_grid("temperature=0.5, 1"),
            Err(GridError::EmptyValue("temperature=0.5,".into()))
        );
    }

    #[test]
    fn cells_combine_the_axes_first_slowest_and_refuse_bad_values() {
        let axes = parse_grid("temperature=0.5,1 top_k=5,10,20").unwrap();
        let cells = cells(&SamplingParams::default(), &axes).unwrap();
        let shape: Vec<(f32, i32)> = cells
            .iter()
            .map(|(_, p)| (p.temperature, p.top_k))
            .collect();
        assert_eq!(
            shape,
            [
                (0.5, 5),
                (0.5, 10),
                (0.5, 20),
                (1.0, 5),
                (1.0, 10),
                (1.0, 20)
            ]
        );
        assert_eq!(describe(&cells[4].0), "temperature=1.0 top_k=10");
        let base = SamplingParams::default();
        let bad = super::cells(&base, &parse_grid("top_p=0.5,7").unwrap()).unwrap_err();
        assert!(bad.to_string().starts_with("top_p=7: "), "{bad}");
        assert!(bad.names_an_axis());
        let twice = super::cells(&base, &parse_grid("top_k=1 top_k=2").unwrap());
        assert_eq!(twice, Err(GridError::Twice("top_k".into())));
        let unknown = super::cells(&base, &parse_grid("temprature=1").unwrap()).unwrap_err();
        assert!(unknown.to_string().contains("did you mean"), "{unknown}");
        let keys = ["seed", "top_k", "min_p", "top_p"];
        let huge: Vec<Axis> = keys
            .iter()
            .map(|k| parse_axis(&format!("{k}=1,2,3,4,5,6,7,8,9,10")).unwrap())
            .collect();
        let refused = super::cells(&base, &huge).unwrap_err();
        assert!(refused.to_string().contains("10000 cells"), "{refused}");
        assert!(!refused.names_an_axis());
    }
}
