//! The state of a layer that keeps none: it attends over the keys and values an earlier layer
//! wrote (Gemma 4's last layers), so cutting, copying and joining rows leave it as it is.

use super::{Cuts, LayerState};
use candle_core::Result;
use std::any::Any;

#[derive(Debug)]
pub(crate) struct Borrowed;

impl LayerState for Borrowed {
    fn cuts(&self, _len: usize) -> Cuts {
        Cuts::from(0)
    }

    fn truncate(&mut self, _len: usize, _held: usize) -> Result<()> {
        Ok(())
    }

    fn fork(&mut self, _n: usize) -> Result<()> {
        Ok(())
    }

    fn snapshot(&self, _row: usize, _len: usize, _held: usize) -> Result<Box<dyn LayerState>> {
        Ok(Box::new(Borrowed))
    }

    fn extend(&mut self, sources: &[&dyn LayerState], _len: usize, _held: &[usize]) -> Result<()> {
        if sources.iter().any(|s| !s.as_any().is::<Borrowed>()) {
            candle_core::bail!("a joining row keeps another kind of state");
        }
        Ok(())
    }

    fn retain_rows(&mut self, _keep: &[bool]) -> Result<()> {
        Ok(())
    }

    fn bytes(&self, _len: usize) -> usize {
        0
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}
