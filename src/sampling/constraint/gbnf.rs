// TEMPORARY placeholder until the translator lands; never committed.
#[derive(Debug)]
pub struct GbnfError(String);
impl std::fmt::Display for GbnfError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
pub fn to_lark(_gbnf: &str) -> Result<String, GbnfError> {
    Err(GbnfError("todo".into()))
}
