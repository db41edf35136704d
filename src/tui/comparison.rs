//! What is compared: the models, the parameter sets (A/B) and the sides, one per model and set,
//! each a group of columns with its own run.

use crate::engine::{Branch, Prompt, RunId};
use crate::params::SamplingParams;
use crate::response::SampleResponse;
use crate::tui::branch_tree::{Parent, Tree};
pub use crate::tui::model_slot::ModelId;
use crate::tui::model_slot::{ModelSlot, ModelStatus};
use crate::tui::widgets::params::{ParamsState, Served};
use crate::tui::widgets::prompt::SeenPrompt;
use std::ops::{Index, IndexMut};

/// A side's place in `Comparison::sides`, which is also its columns' group on screen.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct SideId(pub usize);

/// How a compared side's columns are titled: every column by `label` (model, parameter set),
/// the side's first one by `header` (with the device and speed).
#[derive(Debug, Clone, PartialEq)]
pub struct SideTitle {
    pub label: String,
    pub header: String,
}

/// Whether a side's columns show what its parameters give now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    Current,
    /// From an earlier run: the parameters or the prompt changed since.
    Stale,
    /// The side's newest run failed; its columns are what is left of it or of the run before.
    Failed,
}

/// A parameter set: A, the first, or B, the second one compared with it; as a number (`as u32`),
/// the engine lane its runs take. A session file names it `A` or `B`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum SetId {
    #[default]
    A = 0,
    B = 1,
}

impl SetId {
    /// The other set of the two.
    pub fn other(self) -> Self {
        match self {
            Self::A => Self::B,
            Self::B => Self::A,
        }
    }

    /// As column titles and the params panel name it.
    pub fn letter(self) -> char {
        match self {
            Self::A => 'A',
            Self::B => 'B',
        }
    }
}

/// One model with one parameter set: a group of columns with its own run.
#[derive(Debug, Clone, PartialEq)]
pub struct Side {
    /// The model's id (see `ModelSlot::id`).
    pub model: ModelId,
    /// The first parameter set or the second (A/B).
    pub set: SetId,
    /// The run whose events are shown; events of any other run are dropped.
    pub current: Option<RunId>,
    /// The current run is still producing events.
    pub active: bool,
    /// Something changed (or nothing ran yet): run once the debounce ends and the model is ready.
    pub pending: bool,
    /// The current run's result once it finished, for models that load later to score.
    pub response: Option<Box<SampleResponse>>,
    /// The parameters of the current run, which the inspector's traces replay.
    pub run_params: Option<SamplingParams>,
    /// What the current run was asked, which the other models score its samples after.
    pub run_prompt: Option<Prompt>,
    /// The run whose columns are on screen (the last one that started).
    pub shown: Option<RunId>,
    /// Why the current run failed.
    pub error: Option<String>,
    /// What the model saw of the prompt in the current run.
    pub seen: Option<SeenPrompt>,
    /// The branches the user made from this side's samples.
    pub tree: Tree,
    /// The branches the current run ran, which the inspector's traces replay.
    pub run_branches: Vec<Branch>,
    /// Where the cursor goes once the next run starts: a sample of it, and a token (`None`:
    /// the newest), after a branch was made or a step taken.
    pub follow: Option<(u32, Option<usize>)>,
    /// An edited sample whose tokens its model is finding (edit and continue).
    pub edit: Option<PendingEdit>,
}

impl Side {
    pub fn new(model: ModelId, set: SetId) -> Self {
        Self {
            model,
            set,
            current: None,
            active: false,
            pending: true,
            response: None,
            run_params: None,
            run_prompt: None,
            shown: None,
            error: None,
            seen: None,
            tree: Tree::default(),
            run_branches: Vec::new(),
            follow: None,
            edit: None,
        }
    }

    /// Whether the columns on screen are from the current run and what became of it.
    pub fn mark(&self) -> Mark {
        if self.error.is_some() {
            Mark::Failed
        } else if self.shown.is_some() && (self.pending || self.current != self.shown) {
            Mark::Stale
        } else {
            Mark::Current
        }
    }
}

/// `sides[id]`: the sides are indexed by their id.
impl Index<SideId> for Vec<Side> {
    type Output = Side;

    fn index(&self, id: SideId) -> &Side {
        &self[id.0]
    }
}

impl IndexMut<SideId> for Vec<Side> {
    fn index_mut(&mut self, id: SideId) -> &mut Side {
        &mut self[id.0]
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    /// One per `--model` or model added, in order.
    pub models: Vec<ModelSlot>,
    /// The parameter set being edited, which is set `editing_set`.
    pub params: ParamsState,
    /// The parameter set not being edited, when two are compared (A/B).
    pub other_set: Option<ParamsState>,
    pub editing_set: SetId,
    /// Every model × parameter set, in column order; one side when nothing is compared.
    pub sides: Vec<Side>,
    /// The id the next model added at run time gets.
    pub next_model_id: ModelId,
}

impl Comparison {
    /// One model (id 0, not yet named) with one parameter set.
    pub fn new(params: ParamsState) -> Self {
        Self {
            models: vec![ModelSlot::default()],
            params,
            other_set: None,
            editing_set: SetId::A,
            sides: vec![Side::new(ModelId(0), SetId::A)],
            next_model_id: ModelId(1),
        }
    }

    /// Compares the models `specs` (ids 0, 1, …), each with the current params and, when
    /// given, a second parameter set: one side per (model, set), models first.
    pub fn compare(&mut self, specs: &[String], second_set: Option<ParamsState>) {
        self.compare_from(ModelId(0), specs, second_set);
    }

    /// [`Comparison::compare`] with the models numbered from `first`: a session opened at run
    /// time numbers its models after the ones it replaces, whose engines' late events would
    /// otherwise reach the new models.
    pub fn compare_from(
        &mut self,
        first: ModelId,
        specs: &[String],
        second_set: Option<ParamsState>,
    ) -> Vec<ModelId> {
        self.other_set = second_set;
        self.editing_set = SetId::A;
        self.models.clear();
        self.sides.clear();
        self.next_model_id = first;
        specs.iter().map(|spec| self.add_model(spec)).collect()
    }

    /// A new model slot with its sides (one per parameter set), owed a run; returns its id.
    /// It joins in chat mode when a model is in it (its load says if it has no template).
    pub fn add_model(&mut self, spec: &str) -> ModelId {
        let id = self.next_model_id;
        self.next_model_id = ModelId(id.0 + 1);
        let chat = self.models.iter().any(|m| m.chat);
        self.models.push(ModelSlot {
            id,
            spec: spec.to_owned(),
            chat,
            ..ModelSlot::default()
        });
        let sets: &[SetId] = if self.other_set.is_some() {
            &[SetId::A, SetId::B]
        } else {
            &[SetId::A]
        };
        self.sides
            .extend(sets.iter().map(|&set| Side::new(id, set)));
        id
    }

    /// The parameters of set `set`.
    pub fn set_params(&self, set: SetId) -> &ParamsState {
        match &self.other_set {
            Some(other) if set != self.editing_set => other,
            _ => &self.params,
        }
    }

    /// How each side's columns are titled, derived from the models and sets as they are now;
    /// empty when only one side is shown.
    pub fn side_titles(&self) -> Vec<SideTitle> {
        if self.sides.len() < 2 {
            return Vec::new();
        }
        self.sides
            .iter()
            .map(|side| {
                let slot = self.slot(side.model);
                let mut names = Vec::new();
                if self.models.len() > 1 {
                    names.push(slot.and_then(ModelSlot::name).unwrap_or("model").to_owned());
                }
                if self.other_set.is_some() {
                    let preset = &self.set_params(side.set).preset_name;
                    names.push(format!("{}:{preset}", side.set.letter()));
                }
                let label = names.join(" ");
                let mut header = label.clone();
                if let Some(ModelStatus::Ready { device, .. }) = slot.map(|s| &s.status) {
                    header.push_str(&format!(" · {device}"));
                }
                if let Some(rate) = slot.and_then(|s| s.tok_per_s) {
                    header.push_str(&format!(" · {rate:.0} tok/s"));
                }
                SideTitle { label, header }
            })
            .collect()
    }

    /// The served models' servers and the parameters each has no place for, which the params
    /// panel marks.
    pub fn served(&self) -> Vec<Served<'_>> {
        self.models
            .iter()
            .filter_map(|m| m.served.as_ref())
            .map(|(server, ignored)| Served { server, ignored })
            .collect()
    }

    /// The side `id`, if there is one.
    pub fn side(&self, id: SideId) -> Option<&Side> {
        self.sides.get(id.0)
    }

    /// The side whose current run is `run_id` (run ids are unique across sides).
    pub fn side_running(&self, run_id: RunId) -> Option<SideId> {
        self.sides
            .iter()
            .position(|s| s.current == Some(run_id))
            .map(SideId)
    }

    /// Every side's id, in side order.
    pub fn side_ids(&self) -> impl DoubleEndedIterator<Item = SideId> + use<> {
        (0..self.sides.len()).map(SideId)
    }

    /// Each side's mark, in side order.
    pub fn side_marks(&self) -> Vec<Mark> {
        self.sides.iter().map(Side::mark).collect()
    }

    /// The model exported code loads: one engine takes one model, so the first one, as given
    /// to `--model` or the picker.
    pub fn export_model(&self) -> &str {
        self.models.first().map_or("", |m| m.spec.as_str())
    }

    pub fn slot(&self, id: ModelId) -> Option<&ModelSlot> {
        self.models.iter().find(|m| m.id == id)
    }

    pub fn slot_mut(&mut self, id: ModelId) -> Option<&mut ModelSlot> {
        self.models.iter_mut().find(|m| m.id == id)
    }

    /// Whether model `id` is loaded.
    pub fn is_ready(&self, id: ModelId) -> bool {
        self.slot(id).is_some_and(ModelSlot::ready)
    }

    /// Every model is loaded.
    pub fn ready(&self) -> bool {
        self.models.iter().all(ModelSlot::ready)
    }

    /// Every loaded model's special-token texts, longest first.
    pub fn special_tokens(&self) -> Vec<&str> {
        let mut texts: Vec<&str> = self
            .models
            .iter()
            .flat_map(|m| m.special_tokens.iter().map(String::as_str))
            .collect();
        texts.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        texts.dedup();
        texts
    }
}

/// An edit sent to the model to be tokenized, waiting for its answer.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingEdit {
    pub id: RunId,
    pub parent: Parent,
    /// The sample's tokens the edit was made to.
    pub sample: Vec<u32>,
}
