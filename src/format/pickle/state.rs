//! What a checkpoint's pickle holds, as named tensors: a state dict, flat or nested.
//!
//! Nested dicts, lists and tuples are flattened with dotted names, as `state_dict()` names
//! a module's parameters: `{"model": {"embed.weight": T}}` gives `model.embed.weight`, and a
//! list's items are numbered (`layers.0`). `FILE:NAME` and every glob of `--keep` and
//! `--rules` then select among them; the `--dry-run` lists the names. Values that are not
//! tensors (an `epoch` int, a config string) are skipped and noted.

use std::collections::HashMap;

use super::classes::DataClass;
use super::dtensor::{self, Distributed};
use super::value::{Id, Node, TensorRecord, kind_of};
use super::vm::Pickled;

/// The deepest nesting of dicts, lists and tuples the walk follows. A checkpoint nests a
/// few levels (`{"model": {"state_dict": ...}}`, an optimizer's `state.0.exp_avg`); a cycle
/// (a list that holds itself) stops here too.
pub const MAX_DEPTH: usize = 32;

/// The walk's bound on work: it visits at most this many values for each value the pickle
/// made (plus [`VISITS_FLOOR`]). A state dict is a tree, visited once; a dict or list put in
/// it twice (`{"model": sd, "ema": sd}`) is visited twice, and named twice, as torch would
/// load it. A pickle that nests one shared list in itself (`node = [node, node]`, 28 times,
/// 1.7 KB) would be a tree of 2^28 values: refused at this bound instead.
pub const VISITS_PER_VALUE: u64 = 8;

/// See [`VISITS_PER_VALUE`].
pub const VISITS_FLOOR: u64 = 4096;

/// The bytes the walk may hold (tensors' names and records, notes, the keys it compares), so
/// that what a pickle shares cannot make it copy without bound. 100,000 tensors take about
/// 20 MiB.
pub const HELD_BYTES: u64 = 256 << 20;

/// The tensors a pickle holds, by name, in the order the pickle lists them.
#[derive(Debug, Default)]
pub struct Holdings {
    /// Each tensor with its dotted name (`None`: the pickle is one tensor, unnamed).
    pub tensors: Vec<(Option<String>, TensorRecord)>,
    /// What was left out, one line each: values that are not tensors.
    pub skipped: Vec<String>,
    /// Tensors tjoin cannot read (quantized, sparse), by name, and why.
    pub unreadable: Vec<(String, String)>,
    /// For each tensor that is a DTensor's local block (by its place in `tensors`), the
    /// layout its file records.
    pub distributed: Vec<(usize, Distributed)>,
}

/// Walks the pickle's root: a tensor, or containers of them.
pub fn holdings(pickled: &Pickled) -> Result<Holdings, String> {
    let mut out = Holdings::default();
    let mut walk = Walk {
        pickled,
        seen: HashMap::new(),
        visits: (pickled.nodes.len() as u64)
            .saturating_mul(VISITS_PER_VALUE)
            .saturating_add(VISITS_FLOOR),
        bytes: HELD_BYTES,
        holds: HashMap::new(),
    };
    match pickled.node(pickled.root) {
        Node::Tensor(record) => out.tensors.push((None, (**record).clone())),
        Node::Object(object) if object.class == DataClass::DTensor => {
            let (record, layout) = dtensor::read(&pickled.nodes, object)
                .map_err(|why| format!("the file holds {why}"))?;
            out.distributed.push((0, layout));
            out.tensors.push((None, record));
        }
        Node::Dict(_) | Node::List(_) | Node::Tuple(_) => {
            walk.walk(pickled.root, "", 0, &mut out)?;
        }
        Node::Unreadable(why) => return Err(format!("the file holds {why}")),
        other => {
            return Err(format!(
                "the file holds {}, not a tensor or a dict of them",
                kind_of(other)
            ));
        }
    }
    Ok(out)
}

/// The walk of a pickle's containers, within its budget of visits and bytes.
struct Walk<'a> {
    pickled: &'a Pickled,
    /// Each tensor's name, and its place in the holdings.
    seen: HashMap<String, usize>,
    /// Visits left.
    visits: u64,
    /// Bytes left.
    bytes: u64,
    /// Whether a container holds a tensor, once found.
    holds: HashMap<Id, bool>,
}

impl Walk<'_> {
    /// Counts one value visited.
    fn visit(&mut self) -> Result<(), String> {
        if self.visits == 0 {
            let made = self.pickled.nodes.len();
            return Err(format!(
                "its dicts and lists hold more values than a walk of its {made} values can \
                 reach ({} visits): one container is put in itself or in another many times \
                 over, which no state dict does",
                (made as u64)
                    .saturating_mul(VISITS_PER_VALUE)
                    .saturating_add(VISITS_FLOOR)
            ));
        }
        self.visits -= 1;
        Ok(())
    }

    /// Counts `bytes` held, before they are allocated.
    fn hold(&mut self, bytes: usize) -> Result<(), String> {
        let bytes = bytes as u64;
        if bytes > self.bytes {
            return Err(format!(
                "its names and tensors take more than {HELD_BYTES} bytes, tjoin's limit on \
                 what one pickle describes: its keys are shared or nested far more than any \
                 state dict's"
            ));
        }
        self.bytes -= bytes;
        Ok(())
    }

    fn walk(
        &mut self,
        id: Id,
        prefix: &str,
        depth: usize,
        out: &mut Holdings,
    ) -> Result<(), String> {
        let pickled = self.pickled;
        if depth >= MAX_DEPTH {
            return Err(format!(
                "its dicts and lists nest more than {MAX_DEPTH} deep (at `{}`), which no \
                 checkpoint does; it may hold itself",
                crate::messages::excerpt(prefix)
            ));
        }
        let entries: Vec<(String, Id)> = match pickled.node(id) {
            Node::Dict(entries) => {
                // A key set twice keeps its last value, as in Python.
                let mut named: Vec<(String, Id)> = Vec::with_capacity(entries.len().min(1 << 16));
                let mut place: HashMap<String, usize> = HashMap::new();
                for &(key, value) in entries.iter() {
                    self.visit()?;
                    let key = match pickled.node(key) {
                        Node::Str(key) => {
                            // The key, in `named` and in `place`.
                            self.hold(2 * key.len())?;
                            key.to_string()
                        }
                        Node::Int(key) => key.to_string(),
                        Node::Bool(key) => if *key { "True" } else { "False" }.to_string(),
                        other => {
                            self.hold(NOTE_BYTES)?;
                            out.skipped.push(format!(
                                "{}a value whose key is {}, not a name",
                                in_prefix(prefix),
                                kind_of(other)
                            ));
                            continue;
                        }
                    };
                    match place.get(&key) {
                        Some(&at) => named[at].1 = value,
                        None => {
                            place.insert(key.clone(), named.len());
                            named.push((key, value));
                        }
                    }
                }
                named
            }
            Node::List(items) | Node::Tuple(items) => {
                let mut numbered = Vec::with_capacity(items.len().min(1 << 16));
                for (i, &item) in items.iter().enumerate() {
                    self.visit()?;
                    numbered.push((i.to_string(), item));
                }
                numbered
            }
            _ => return Ok(()),
        };
        for (key, value) in entries {
            let name = if prefix.is_empty() {
                key
            } else {
                self.hold(prefix.len() + 1 + key.len())?;
                format!("{prefix}.{key}")
            };
            self.entry(value, name, depth, out)?;
        }
        Ok(())
    }

    /// The value `value` of the entry `name`: a tensor, a container to walk, or a note.
    fn entry(
        &mut self,
        value: Id,
        name: String,
        depth: usize,
        out: &mut Holdings,
    ) -> Result<(), String> {
        let pickled = self.pickled;
        match pickled.node(value) {
            Node::Tensor(record) => {
                self.named_once(&name)?;
                self.hold(name.len() * 2 + size_of::<TensorRecord>() + record.storage.key.len())?;
                self.seen.insert(name.clone(), out.tensors.len());
                out.tensors.push((Some(name), (**record).clone()));
            }
            Node::Unreadable(why) => {
                self.hold(name.len() + why.len())?;
                out.unreadable.push((name, why.to_string()));
            }
            Node::Object(object) if object.class == DataClass::DTensor => {
                self.named_once(&name)?;
                match dtensor::read(&pickled.nodes, object) {
                    Ok((record, layout)) => {
                        self.hold(name.len() * 2 + 2 * size_of::<TensorRecord>())?;
                        self.seen.insert(name.clone(), out.tensors.len());
                        out.distributed.push((out.tensors.len(), layout));
                        out.tensors.push((Some(name), record));
                    }
                    Err(why) => {
                        self.hold(name.len() + why.len())?;
                        out.unreadable.push((name, why));
                    }
                }
            }
            Node::Dict(_) | Node::List(_) | Node::Tuple(_) if self.holds_tensors(value)? => {
                self.walk(value, &name, depth + 1, out)?;
            }
            other => {
                self.hold(NOTE_BYTES)?;
                out.skipped.push(format!(
                    "`{}`, not a tensor: {}",
                    crate::messages::excerpt(&name),
                    describe(other)
                ));
            }
        }
        Ok(())
    }

    /// Refuses a second tensor of the name `name`.
    fn named_once(&self, name: &str) -> Result<(), String> {
        if self.seen.contains_key(name) {
            return Err(format!(
                "two of its tensors are both named `{}` once nested names are joined with dots",
                crate::messages::excerpt(name)
            ));
        }
        Ok(())
    }

    /// Whether a container holds a tensor (or something that claims to be one) at any depth
    /// up to the limit: containers of plain values are noted as one value, not walked item
    /// by item. Each container's answer is kept, and every value looked at is a visit.
    fn holds_tensors(&mut self, id: Id) -> Result<bool, String> {
        if let Some(&known) = self.holds.get(&id) {
            return Ok(known);
        }
        let pickled = self.pickled;
        let mut stack = vec![(id, 0usize)];
        let mut found = false;
        while let Some((id, depth)) = stack.pop() {
            self.visit()?;
            match pickled.node(id) {
                Node::Tensor(_) | Node::Unreadable(_) => found = true,
                Node::Object(object) if object.class == DataClass::DTensor => found = true,
                Node::Dict(_) | Node::List(_) | Node::Tuple(_) if depth >= MAX_DEPTH => {
                    // Walk it: the walk's own bounds say what is wrong.
                    found = true;
                }
                Node::Dict(_) | Node::List(_) | Node::Tuple(_) if depth > 0 => {
                    match self.holds.get(&id) {
                        Some(&known) => found = known,
                        None => stack.extend(children(pickled.node(id)).map(|v| (v, depth + 1))),
                    }
                }
                Node::Dict(_) | Node::List(_) | Node::Tuple(_) => {
                    stack.extend(children(pickled.node(id)).map(|v| (v, depth + 1)));
                }
                _ => {}
            }
            if found {
                break;
            }
        }
        self.holds.insert(id, found);
        Ok(found)
    }
}

/// The values a container holds (a dict's values, not its keys).
fn children(node: &Node) -> impl Iterator<Item = Id> + '_ {
    let (entries, items): (&[(Id, Id)], &[Id]) = match node {
        Node::Dict(entries) => (entries, &[]),
        Node::List(items) | Node::Tuple(items) => (&[], items),
        _ => (&[], &[]),
    };
    entries.iter().map(|&(_, v)| v).chain(items.iter().copied())
}

/// What one note of a value left out takes at most (its name is an excerpt).
const NOTE_BYTES: usize = 256;

fn in_prefix(prefix: &str) -> String {
    if prefix.is_empty() {
        String::new()
    } else {
        format!("in `{}`, ", crate::messages::excerpt(prefix))
    }
}

/// A value that is not a tensor, as a note shows it: `an int, 3`.
fn describe(node: &Node) -> String {
    match node {
        Node::Int(v) => format!("an int, {v}"),
        Node::Float(v) => format!("a float, {v}"),
        Node::Bool(v) => format!("a bool, {}", if *v { "True" } else { "False" }),
        Node::Str(s) => format!("a string, `{}`", crate::messages::excerpt(s)),
        Node::Dict(entries) => format!("a dict of {} values, none a tensor", entries.len()),
        Node::List(items) => format!("a list of {} values, none a tensor", items.len()),
        Node::Tuple(items) => format!("a tuple of {} values, none a tensor", items.len()),
        Node::Storage(_) => "a storage, not a tensor".to_string(),
        other => kind_of(other),
    }
}
