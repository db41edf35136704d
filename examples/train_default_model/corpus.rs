//! A seeded grammar of short children's stories: the training text of samplab-tiny.
//!
//! Each story keeps its cast, place and object from start to end (so a model must copy from
//! its context), picks every sentence from several templates, and has dialogue in quotes and
//! paragraphs separated by a blank line, so that every sampling knob has something to act on.

use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::{Rng, SeedableRng};
use std::collections::{BTreeSet, HashMap};

/// Separates paragraphs: the stop string a user will try first.
pub const PARAGRAPH_BREAK: &str = "\n\n";

struct Character {
    name: &'static str,
    he: &'static str,
    his: &'static str,
    him: &'static str,
}

const GIRLS: &[&str] = &[
    "Lily", "Mia", "Anna", "Sue", "Zoe", "Lucy", "Emma", "Rosa", "Ella", "Amy", "Kate", "Nina",
];
const BOYS: &[&str] = &[
    "Tom", "Max", "Ben", "Sam", "Leo", "Tim", "Jack", "Finn", "Jake", "Bob", "Dan", "Luke",
];
const SHE: (&str, &str, &str) = ("she", "her", "her");
const HE: (&str, &str, &str) = ("he", "his", "him");

/// Kinds of hero or friend; `None` means a child, who is a girl or a boy by name.
const ANIMALS: &[&str] = &[
    "dog", "cat", "bunny", "bear", "bird", "fox", "duck", "frog", "mouse", "lion", "owl", "pig",
];

/// Words drawn afresh every time their slot appears.
const FRESH: &[(&str, &[&str])] = &[
    (
        "adj",
        &[
            "little", "small", "big", "kind", "brave", "shy", "happy", "curious", "clever",
            "gentle", "silly", "tiny", "friendly", "funny",
        ],
    ),
    (
        "time",
        &[
            "One day",
            "One morning",
            "One sunny day",
            "The next day",
            "After lunch",
            "One cold morning",
            "Later that day",
        ],
    ),
    (
        "activity",
        &[
            "play outside",
            "draw pictures",
            "sing songs",
            "read books",
            "dance in the sun",
            "climb trees",
            "build with blocks",
            "look at the stars",
            "run in the grass",
            "bake cookies",
            "splash in puddles",
            "pick flowers",
        ],
    ),
    (
        "said",
        &["said", "shouted", "cried", "whispered", "laughed"],
    ),
    ("asked", &["asked", "said", "whispered"]),
    (
        "exclaim",
        &["Wow", "Oh no", "Look", "Yay", "Oh my", "Hooray", "Oh"],
    ),
    (
        "feeling",
        &[
            "happy",
            "sad",
            "scared",
            "surprised",
            "proud",
            "excited",
            "worried",
        ],
    ),
    (
        "weather",
        &["sunny", "warm", "windy", "cold", "bright", "cloudy"],
    ),
    (
        "food",
        &[
            "cake", "cookies", "apples", "soup", "bread", "pie", "berries", "carrots", "milk",
        ],
    ),
    (
        "relative",
        &["mom", "dad", "grandma", "grandpa", "sister", "brother"],
    ),
    (
        "spot",
        &[
            "under a tree",
            "near the water",
            "behind a rock",
            "on the grass",
            "in the sand",
            "by the gate",
            "next to a bush",
        ],
    ),
    (
        "moral",
        &[
            "sharing is good",
            "being kind is the best thing",
            "it is good to help friends",
            "you should never give up",
            "it is fun to try new things",
            "friends make everything better",
            "it is okay to be scared",
        ],
    ),
    (
        "fun",
        &[
            "played a game",
            "ran and jumped",
            "laughed and sang",
            "had a picnic",
            "told funny stories",
            "danced in a circle",
        ],
    ),
    (
        "problem",
        &[
            "a big wind came and blew the {thing} away",
            "the {thing} fell into a deep hole",
            "it started to rain very hard",
            "a big dog ran up and barked loudly",
            "the {thing} got stuck up in a tall tree",
            "the {thing} broke into two pieces",
        ],
    ),
    (
        "fix",
        &[
            "got a long stick and pulled it out",
            "asked a tall man for help",
            "found some tape and fixed it",
            "waited until the sun came back",
            "climbed up very slowly",
            "said a kind word and it was calm",
        ],
    ),
];

/// Story-wide choices, fixed when the story starts.
const PLACES: &[&str] = &[
    "park", "forest", "garden", "beach", "farm", "lake", "hill", "meadow", "river", "zoo",
];
const HOMES: &[&str] = &[
    "in a small house",
    "in a big tree",
    "on a farm",
    "near a quiet lake",
    "in a busy town",
    "at the edge of the woods",
];
const THINGS: &[&str] = &[
    "ball", "kite", "box", "hat", "book", "boat", "drum", "shell", "key", "map", "balloon", "cup",
];
const COLORS: &[&str] = &[
    "red", "blue", "green", "yellow", "pink", "purple", "orange", "shiny", "golden",
];

const OPENINGS: &[&str] = &[
    "Once upon a time, there was a {adj} {kind} named {name}.",
    "Once upon a time, in a {adj} town, there lived a {kind} named {name}.",
    "Once upon a time, a {adj} {kind} named {name} lived {home}.",
    "Once upon a time, there was a {kind} called {name} who lived {home}.",
];
const INTRO: &[&str] = &[
    "{He} lived {home} with {his} {relative}.",
    "{He} loved to {activity}.",
    "Every day, {he} liked to {activity}.",
    "{His} best friend was a {fkind} named {friend}.",
    "{Name} was always {feeling} when {he} could {activity}.",
    "{He} had a {color} {thing} that {he} loved very much.",
];
const EVENT: &[&str] = &[
    "{time}, {name} went to the {place} with {his} {relative}.",
    "{time}, {name} walked to the {place}.",
    "It was a {weather} day, and the sky was blue.",
    "At the {place}, {he} saw a {color} {thing} {spot}.",
    "\"{exclaim}!\" {said} {name}. \"What a nice {thing}!\"",
    "{He} picked up the {thing} and held it close.",
    "{Name} wanted to show the {thing} to {friend}.",
];
const MEETING: &[&str] = &[
    "Then {name} met {friend}, a {adj} {fkind}.",
    "\"Hello, {friend}!\" {said} {name}. \"Do you want to play with me?\"",
    "\"Can I play with your {thing}?\" {asked} {friend}.",
    "\"Yes, you can,\" {said} {name}. \"Let's play together!\"",
    "{Friend} smiled and said, \"Thank you, {name}.\"",
    "{Friend} looked {feeling}, so {name} gave {fhim} some {food}.",
];
const TROUBLE: &[&str] = &[
    "But then, {problem}.",
    "\"{exclaim}!\" {said} {friend}. \"What do we do now?\"",
    "{Name} felt {feeling}, but {he} did not give up.",
    "{Name} had an idea. {He} {fix}.",
    "{Friend} helped too, and soon the {thing} was safe.",
];
const ENDING: &[&str] = &[
    "{Name} and {friend} {fun} until the sun went down.",
    "From that day on, {name} and {friend} were best friends.",
    "{Name} learned that {moral}.",
    "That night, {name} went to bed with a big smile.",
    "They went home and ate {food} with {his} {relative}.",
    "{Name} was very {feeling}, and {he} hugged {friend}.",
];

/// One paragraph of a story: sentences drawn from `templates`, kept in their order.
struct Paragraph {
    templates: &'static [&'static str],
    least: usize,
    most: usize,
    /// Left out of a third of the stories, so that stories differ in shape, not just in words.
    optional: bool,
}

const PARAGRAPHS: &[Paragraph] = &[
    Paragraph {
        templates: INTRO,
        least: 2,
        most: 3,
        optional: false,
    },
    Paragraph {
        templates: EVENT,
        least: 2,
        most: 4,
        optional: false,
    },
    Paragraph {
        templates: MEETING,
        least: 2,
        most: 4,
        optional: false,
    },
    Paragraph {
        templates: TROUBLE,
        least: 2,
        most: 4,
        optional: true,
    },
    Paragraph {
        templates: ENDING,
        least: 2,
        most: 3,
        optional: false,
    },
];

/// Generates the same stories for the same seed, forever (ChaCha8, no `rand` distributions).
pub struct Stories {
    rng: ChaCha8Rng,
}

impl Stories {
    pub fn new(seed: u64) -> Self {
        Self {
            rng: ChaCha8Rng::seed_from_u64(seed),
        }
    }

    fn below(&mut self, n: usize) -> usize {
        (self.rng.next_u64() % n as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }

    fn character(&mut self, not: Option<&str>) -> (Character, &'static str) {
        loop {
            let girl = self.below(2) == 0;
            let name = self.pick(if girl { GIRLS } else { BOYS });
            if Some(name) == not {
                continue;
            }
            let (he, his, him) = if girl { SHE } else { HE };
            let kind = if self.below(3) == 0 {
                self.pick(ANIMALS)
            } else if girl {
                "girl"
            } else {
                "boy"
            };
            return (Character { name, he, his, him }, kind);
        }
    }

    /// One story: paragraphs separated by [`PARAGRAPH_BREAK`], no trailing newline.
    pub fn story(&mut self) -> String {
        let (hero, kind) = self.character(None);
        let (friend, fkind) = self.character(Some(hero.name));
        let fixed: HashMap<&str, &str> = HashMap::from([
            ("name", hero.name),
            ("he", hero.he),
            ("his", hero.his),
            ("him", hero.him),
            ("kind", kind),
            ("friend", friend.name),
            ("fhim", friend.him),
            ("fkind", fkind),
            ("place", self.pick(PLACES)),
            ("home", self.pick(HOMES)),
            ("thing", self.pick(THINGS)),
            ("color", self.pick(COLORS)),
            ("relative", self.pick(lookup_fresh("relative"))),
        ]);
        let mut paragraphs = Vec::new();
        for (i, paragraph) in PARAGRAPHS.iter().enumerate() {
            if paragraph.optional && self.below(3) == 0 {
                continue;
            }
            let count = paragraph.least + self.below(paragraph.most - paragraph.least + 1);
            let mut sentences = Vec::with_capacity(count + 1);
            if i == 0 {
                let opening = self.pick(OPENINGS);
                sentences.push(self.fill(opening, &fixed));
            }
            for index in self.distinct(paragraph.templates.len(), count) {
                sentences.push(self.fill(paragraph.templates[index], &fixed));
            }
            paragraphs.push(sentences.join(" "));
        }
        paragraphs.join(PARAGRAPH_BREAK)
    }

    /// `count` distinct indices below `n`, in increasing order (templates keep their order).
    fn distinct(&mut self, n: usize, count: usize) -> Vec<usize> {
        let mut chosen = BTreeSet::new();
        while chosen.len() < count.min(n) {
            chosen.insert(self.below(n));
        }
        chosen.into_iter().collect()
    }

    /// Replaces each `{slot}` with its story-wide value or a fresh phrase (itself filled);
    /// `{Slot}` capitalises.
    fn fill(&mut self, template: &str, fixed: &HashMap<&str, &str>) -> String {
        let mut out = String::with_capacity(template.len() * 2);
        let mut rest = template;
        while let Some(open) = rest.find('{') {
            out.push_str(&rest[..open]);
            let close = open + rest[open..].find('}').expect("templates close every slot");
            let slot = &rest[open + 1..close];
            let key = slot.to_lowercase();
            let value = match fixed.get(key.as_str()) {
                Some(value) => (*value).to_owned(),
                None => {
                    let phrase = self.pick(lookup_fresh(&key));
                    self.fill(phrase, fixed)
                }
            };
            if slot.starts_with(char::is_uppercase) {
                out.push_str(&capitalise(&value));
            } else {
                out.push_str(&value);
            }
            rest = &rest[close + 1..];
        }
        out.push_str(rest);
        out
    }
}

fn lookup_fresh(key: &str) -> &'static [&'static str] {
    FRESH
        .iter()
        .find(|(name, _)| *name == key)
        .map(|(_, words)| *words)
        .unwrap_or_else(|| panic!("the grammar has no slot `{key}`"))
}

fn capitalise(word: &str) -> String {
    let mut chars = word.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// The words of a text, lower-cased, without punctuation and quotes.
pub fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| c.is_whitespace() || ",.!?\"".contains(c))
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
}

/// Every word the grammar can write.
pub fn lexicon() -> BTreeSet<String> {
    let fixed_lists = [
        GIRLS, BOYS, ANIMALS, PLACES, HOMES, THINGS, COLORS, OPENINGS, INTRO, EVENT, MEETING,
        TROUBLE, ENDING,
    ];
    let pronouns = [SHE, HE].map(|(a, b, c)| [a, b, c]);
    let mut all: Vec<&str> = fixed_lists.concat();
    all.extend(pronouns.iter().flatten());
    all.extend(["girl", "boy"]);
    all.extend(FRESH.iter().flat_map(|(_, list)| list.iter()));
    all.iter()
        .flat_map(|text| words(text))
        .filter(|w| !w.starts_with('{'))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_writes_the_same_stories() {
        let (mut a, mut b) = (Stories::new(7), Stories::new(7));
        for _ in 0..20 {
            assert_eq!(a.story(), b.story());
        }
        assert_ne!(Stories::new(7).story(), Stories::new(8).story());
    }

    #[test]
    fn stories_vary_in_words_shape_and_dialogue() {
        let mut stories = Stories::new(1);
        let texts: Vec<String> = (0..300).map(|_| stories.story()).collect();
        let distinct: BTreeSet<&String> = texts.iter().collect();
        assert_eq!(distinct.len(), texts.len(), "stories repeat");
        let used: BTreeSet<String> = texts.iter().flat_map(|t| words(t)).collect();
        assert!(used.len() >= 300, "only {} distinct words", used.len());
        let paragraph_counts: BTreeSet<usize> = texts
            .iter()
            .map(|t| t.split(PARAGRAPH_BREAK).count())
            .collect();
        assert!(paragraph_counts.len() >= 2, "{paragraph_counts:?}");
        assert!(texts.iter().all(|t| t.starts_with("Once upon a time")));
        let with_dialogue = texts.iter().filter(|t| t.contains("\"")).count();
        assert!(with_dialogue > texts.len() / 2, "{with_dialogue}");
    }

    #[test]
    fn stories_are_made_of_lexicon_words_without_leftover_slots() {
        let lexicon = lexicon();
        let mut stories = Stories::new(3);
        for _ in 0..200 {
            let story = stories.story();
            assert!(!story.contains(['{', '}']), "{story}");
            assert!(
                !story.ends_with('\n') && !story.contains("\n\n\n"),
                "{story:?}"
            );
            for word in words(&story) {
                assert!(
                    lexicon.contains(&word),
                    "`{word}` is missing from the lexicon"
                );
            }
        }
    }

    #[test]
    fn pronouns_agree_with_the_hero() {
        let mut stories = Stories::new(5);
        for _ in 0..100 {
            let story = stories.story();
            let intro: Vec<String> = words(story.split(PARAGRAPH_BREAK).next().unwrap()).collect();
            let is_girl = intro
                .iter()
                .find_map(|w| {
                    let is = |names: &[&str]| names.iter().any(|n| n.to_lowercase() == *w);
                    (is(GIRLS) || is(BOYS)).then(|| is(GIRLS))
                })
                .expect("the opening names the hero");
            let wrong: &[&str] = if is_girl {
                &["he", "his", "him"]
            } else {
                &["she", "her"]
            };
            assert!(
                !intro.iter().any(|w| wrong.contains(&w.as_str())),
                "{story}"
            );
        }
    }
}
