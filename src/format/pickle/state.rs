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
    let mut seen: HashMap<String, usize> = HashMap::new();
    match pickled.node(pickled.root) {
        Node::Tensor(record) => out.tensors.push((None, (**record).clone())),
        Node::Object(object) if object.class == DataClass::DTensor => {
            let (record, layout) = dtensor::read(&pickled.nodes, object)
                .map_err(|why| format!("the file holds {why}"))?;
            out.distributed.push((0, layout));
            out.tensors.push((None, record));
        }
        Node::Dict(_) | Node::List(_) | Node::Tuple(_) => {
            walk(pickled, pickled.root, "", 0, &mut out, &mut seen)?;
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

fn walk(
    pickled: &Pickled,
    id: Id,
    prefix: &str,
    depth: usize,
    out: &mut Holdings,
    seen: &mut HashMap<String, usize>,
) -> Result<(), String> {
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
            let mut named: Vec<(String, Id)> = Vec::with_capacity(entries.len());
            let mut place: HashMap<String, usize> = HashMap::new();
            for &(key, value) in entries {
                let key = match pickled.node(key) {
                    Node::Str(key) => key.to_string(),
                    Node::Int(key) => key.to_string(),
                    Node::Bool(key) => if *key { "True" } else { "False" }.to_string(),
                    other => {
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
        Node::List(items) | Node::Tuple(items) => items
            .iter()
            .enumerate()
            .map(|(i, &item)| (i.to_string(), item))
            .collect(),
        _ => return Ok(()),
    };
    for (key, value) in entries {
        let name = if prefix.is_empty() {
            key
        } else {
            format!("{prefix}.{key}")
        };
        match pickled.node(value) {
            Node::Tensor(record) => {
                if seen.contains_key(&name) {
                    return Err(format!(
                        "two of its tensors are both named `{}` once nested names are joined \
                         with dots",
                        crate::messages::excerpt(&name)
                    ));
                }
                seen.insert(name.clone(), out.tensors.len());
                out.tensors.push((Some(name), (**record).clone()));
            }
            Node::Unreadable(why) => out.unreadable.push((name, why.to_string())),
            Node::Object(object) if object.class == DataClass::DTensor => {
                if seen.contains_key(&name) {
                    return Err(format!(
                        "two of its tensors are both named `{}` once nested names are joined \
                         with dots",
                        crate::messages::excerpt(&name)
                    ));
                }
                match dtensor::read(&pickled.nodes, object) {
                    Ok((record, layout)) => {
                        seen.insert(name.clone(), out.tensors.len());
                        out.distributed.push((out.tensors.len(), layout));
                        out.tensors.push((Some(name), record));
                    }
                    Err(why) => out.unreadable.push((name, why)),
                }
            }
            Node::Dict(_) | Node::List(_) | Node::Tuple(_) if holds_tensors(pickled, value) => {
                walk(pickled, value, &name, depth + 1, out, seen)?;
            }
            other => out.skipped.push(format!(
                "`{}`, not a tensor: {}",
                crate::messages::excerpt(&name),
                describe(other)
            )),
        }
    }
    Ok(())
}

fn in_prefix(prefix: &str) -> String {
    if prefix.is_empty() {
        String::new()
    } else {
        format!("in `{}`, ", crate::messages::excerpt(prefix))
    }
}

/// Whether a container holds a tensor (or something that claims to be one) at any depth up to
/// the limit: containers of plain values are noted as one value, not walked item by item.
fn holds_tensors(pickled: &Pickled, id: Id) -> bool {
    let mut stack = vec![(id, 0usize)];
    let mut visited = 0usize;
    while let Some((id, depth)) = stack.pop() {
        visited += 1;
        if visited > 1_000_000 {
            // Walk it: the walk's own bounds say what is wrong.
            return true;
        }
        match pickled.node(id) {
            Node::Tensor(_) | Node::Unreadable(_) => return true,
            Node::Object(object) if object.class == DataClass::DTensor => return true,
            Node::Dict(entries) if depth < MAX_DEPTH => {
                stack.extend(entries.iter().map(|&(_, v)| (v, depth + 1)));
            }
            Node::List(items) | Node::Tuple(items) if depth < MAX_DEPTH => {
                stack.extend(items.iter().map(|&v| (v, depth + 1)));
            }
            Node::Dict(_) | Node::List(_) | Node::Tuple(_) => return true,
            _ => {}
        }
    }
    false
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
