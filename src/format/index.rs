//! Hugging Face's sharded safetensors checkpoints: the index file (`model.safetensors.index.json`)
//! that maps each tensor to the shard holding it, the names of the files of a set, and the rule
//! that groups tensors into shards.
//!
//! - **Names.** A set is `{prefix}-{i:05d}-of-{N:05d}.safetensors` plus
//!   `{prefix}.safetensors.index.json`, or `{prefix}.safetensors` alone when it has one shard,
//!   as huggingface_hub's `split_state_dict_into_shards_factory` and transformers'
//!   `save_pretrained` name them. A variant (transformers' and diffusers' `variant="fp16"`)
//!   sits in the index's name before `.json` (`model.safetensors.index.fp16.json`) and in the
//!   shards' after the prefix (`model.fp16-00001-of-00002.safetensors`).
//! - **The index** is read with duplicate keys noticed (serde_json keeps the last silently) and
//!   written as transformers writes it: `json.dumps(index, indent=2, sort_keys=True) + "\n"`,
//!   with Python's escapes (`ensure_ascii`), so that the file is byte-identical.
//! - **The sharding rule** is `split_state_dict_into_shards_factory`'s, greedy in tensor order.

use std::fmt;

use serde::Deserialize;
use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};

/// What a shard file's name ends with.
const SHARD_EXTENSION: &str = ".safetensors";
/// What an index file's name holds after the prefix, before an optional variant and `.json`.
const INDEX_INFIX: &str = ".safetensors.index";

/// The names of the files of one set: its prefix and, if it has one, its variant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetName {
    /// `model`, `diffusion_pytorch_model`, or `--prefix`.
    pub prefix: String,
    /// `fp16` in `model.safetensors.index.fp16.json`.
    pub variant: Option<String>,
}

impl Default for SetName {
    fn default() -> SetName {
        SetName {
            prefix: "model".to_string(),
            variant: None,
        }
    }
}

impl SetName {
    /// The set an index file's name belongs to: `model.safetensors.index.json`,
    /// `diffusion_pytorch_model.safetensors.index.fp16.json`; `None` for any other name.
    pub fn of_index(file_name: &str) -> Option<SetName> {
        SetName::of_index_with(file_name, INDEX_INFIX)
    }

    /// The set an index file's name belongs to, `infix` being what the name holds after the
    /// prefix, before an optional variant and `.json`.
    fn of_index_with(file_name: &str, infix: &str) -> Option<SetName> {
        let stem = file_name.strip_suffix(".json")?;
        let at = stem.rfind(infix)?;
        let (prefix, rest) = (&stem[..at], &stem[at + infix.len()..]);
        let variant = match rest {
            "" => None,
            _ => Some(
                rest.strip_prefix('.')
                    .filter(|v| !v.is_empty() && !v.contains('.'))?,
            ),
        };
        (!prefix.is_empty()).then(|| SetName {
            prefix: prefix.to_string(),
            variant: variant.map(str::to_string),
        })
    }

    /// The prefix with the variant, as the shards' names start.
    fn stem(&self) -> String {
        match &self.variant {
            Some(variant) => format!("{}.{variant}", self.prefix),
            None => self.prefix.clone(),
        }
    }

    /// The name of shard `number` (from 1) of `count`.
    pub fn shard(&self, number: usize, count: usize) -> String {
        format!("{}-{number:05}-of-{count:05}{SHARD_EXTENSION}", self.stem())
    }

    /// Whether `file_name` is the name of one of this set's shards,
    /// `{prefix}-NNNNN-of-NNNNN.safetensors` (five digits or more each, as [`SetName::shard`]
    /// writes them): the names transformers' `save_pretrained` matches
    /// (`{weights_name}-\d{5}-of-\d{5}`) before it removes a previous shard.
    pub fn is_shard_name(&self, file_name: &str) -> bool {
        let numbers = file_name
            .strip_suffix(SHARD_EXTENSION)
            .and_then(|rest| rest.strip_prefix(self.stem().as_str()))
            .and_then(|rest| rest.strip_prefix('-'))
            .and_then(|rest| rest.split_once("-of-"));
        let digits = |text: &str| text.len() >= 5 && text.bytes().all(|b| b.is_ascii_digit());
        numbers.is_some_and(|(number, count)| digits(number) && digits(count))
    }

    /// The name of a set of one file, which has no index.
    pub fn single(&self) -> String {
        format!("{}{SHARD_EXTENSION}", self.stem())
    }

    /// The index's name.
    pub fn index(&self) -> String {
        match &self.variant {
            Some(variant) => format!("{}{INDEX_INFIX}.{variant}.json", self.prefix),
            None => format!("{}{INDEX_INFIX}.json", self.prefix),
        }
    }
}

/// Whether `file_name` names a sharded checkpoint's index.
pub fn is_index_name(file_name: &str) -> bool {
    SetName::of_index(file_name).is_some()
}

/// What a PyTorch set's index file's name holds after the prefix (`pytorch_model.bin.index.json`,
/// as transformers' `save_pretrained(safe_serialization=False)` writes it), before an optional
/// variant and `.json`. Its shards are `torch.save` files (`pytorch_model-00001-of-00002.bin`).
const PICKLE_INDEX_INFIX: &str = ".bin.index";

/// Whether `file_name` names the index of a set of PyTorch checkpoint files
/// (`pytorch_model.bin.index.json`, `pytorch_model.bin.index.fp16.json`). Read, never written:
/// a set tjoin writes is a safetensors set.
pub fn is_pickle_index_name(file_name: &str) -> bool {
    SetName::of_index_with(file_name, PICKLE_INDEX_INFIX).is_some()
}

/// Whether `file`, a shard an index lists, is a path inside the index's folder: relative and
/// made of names only (no `..`, `.`, root or drive). Every reader of an index goes by it: the
/// input index (`src/input/sharded.rs`) and `--like`'s (`src/plan/reference.rs`).
pub fn is_inside_folder(file: &str) -> bool {
    let path = std::path::Path::new(file);
    !file.is_empty()
        && path
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)))
}

/// The number in a shard's name (`model-00002-of-00004.safetensors`: 2), if it has one.
pub fn shard_number(file_name: &str) -> Option<u64> {
    let stem = file_name
        .strip_suffix(SHARD_EXTENSION)
        .or_else(|| file_name.strip_suffix(".bin"))?;
    let (rest, _count) = stem.rsplit_once("-of-")?;
    let (_, number) = rest.rsplit_once('-')?;
    number.parse().ok()
}

/// What an index says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Index {
    /// `metadata.total_size`: the tensors' bytes, all shards together, if it says.
    pub total_size: Option<u64>,
    /// `weight_map`: each tensor's name and the file holding it, in the index's order.
    pub weight_map: Vec<(String, String)>,
}

/// Reads an index file's text. The error says what is wrong with it. A tensor the weight map
/// names twice is kept twice, for the caller to report with the files involved.
pub fn parse(text: &[u8]) -> Result<Index, String> {
    let text = std::str::from_utf8(text).map_err(|e| format!("it is not UTF-8 text: {e}"))?;
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let (metadata, weight_map) = deserializer
        .deserialize_map(IndexVisitor)
        .and_then(|read| deserializer.end().map(|()| read))
        .map_err(|e| format!("it is not a JSON object with a weight_map: {e}"))?;
    let total_size =
        match metadata.as_ref().and_then(|m| m.get("total_size")) {
            None | Some(serde_json::Value::Null) => None,
            Some(size) => Some(size.as_u64().or_else(|| whole(size)).ok_or_else(|| {
                format!("its metadata.total_size is {size}, not a number of bytes")
            })?),
        };
    let weight_map = weight_map
        .ok_or("it has no weight_map")?
        .into_iter()
        .map(|(name, file)| match file {
            serde_json::Value::String(file) => Ok((name, file)),
            other => Err(format!(
                "its weight_map gives tensor `{}` the file {}, not a file name",
                crate::messages::name(&name),
                crate::messages::name(&other.to_string())
            )),
        })
        .collect::<Result<Vec<(String, String)>, String>>()?;
    Ok(Index {
        total_size,
        weight_map,
    })
}

/// A float that is a whole number (some writers put `1234.0`).
fn whole(value: &serde_json::Value) -> Option<u64> {
    let float = value.as_f64()?;
    (float >= 0.0 && float.fract() == 0.0 && float < 2f64.powi(63)).then_some(float as u64)
}

/// The index's `metadata` and its `weight_map` entries in the file's order, duplicates
/// included (serde_json's own maps keep the last of two equal keys, silently).
struct IndexVisitor;

type Read = (
    Option<serde_json::Value>,
    Option<Vec<(String, serde_json::Value)>>,
);

impl<'de> Visitor<'de> for IndexVisitor {
    type Value = Read;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Read, A::Error> {
        let (mut metadata, mut weight_map) = (None, None);
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "metadata" => metadata = Some(map.next_value()?),
                "weight_map" if weight_map.is_some() => {
                    return Err(serde::de::Error::custom("it names weight_map twice"));
                }
                "weight_map" => weight_map = Some(map.next_value::<Entries>()?.0),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok((metadata, weight_map))
    }
}

/// A JSON object's entries in the file's order, duplicates included.
struct Entries(Vec<(String, serde_json::Value)>);

impl<'de> Deserialize<'de> for Entries {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Entries, D::Error> {
        struct EntriesVisitor;
        impl<'de> Visitor<'de> for EntriesVisitor {
            type Value = Entries;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object of tensor names and file names")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entries, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    entries.push(entry);
                }
                Ok(Entries(entries))
            }
        }
        deserializer.deserialize_map(EntriesVisitor)
    }
}

/// The index file's text, as transformers writes it: `json.dumps({"metadata": {"total_size":
/// N}, "weight_map": {...}}, indent=2, sort_keys=True) + "\n"`. `weight_map` may be in any
/// order: keys are sorted here, as Python sorts them (by code point, which is UTF-8's byte
/// order).
pub fn write(total_size: u64, weight_map: &[(String, String)]) -> String {
    let mut entries: Vec<&(String, String)> = weight_map.iter().collect();
    entries.sort();
    let mut text = format!("{{\n  \"metadata\": {{\n    \"total_size\": {total_size}\n  }},\n");
    text.push_str("  \"weight_map\": {");
    for (at, (name, file)) in entries.iter().enumerate() {
        let comma = if at + 1 < entries.len() { "," } else { "" };
        text.push_str(&format!(
            "\n    {}: {}{comma}",
            python_json_string(name),
            python_json_string(file)
        ));
    }
    text.push_str(if entries.is_empty() {
        "}\n}\n"
    } else {
        "\n  }\n}\n"
    });
    text
}

/// A string as Python's `json.dumps` writes it with `ensure_ascii=True`: `\"`, `\\`, the
/// short escapes of `\b\f\n\r\t`, `\u00XX` for other control characters and `\uXXXX`
/// (surrogate pairs beyond the BMP) for everything that is not ASCII.
fn python_json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            _ => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
        }
    }
    out.push('"');
    out
}

/// Groups tensors of `sizes` bytes, in this order, into shards of at most `max` bytes, as
/// huggingface_hub's `split_state_dict_into_shards_factory` does: greedily, starting a new
/// shard when the tensor would take the current one over `max`; a tensor larger than `max`
/// gets a shard of its own, placed in the list ahead of the shard still being filled.
/// Returns each shard's tensors as indexes into `sizes`.
pub fn split(sizes: &[u64], max: u64) -> Vec<Vec<usize>> {
    let mut shards = Vec::new();
    let mut current = Vec::new();
    let mut current_size = 0u64;
    for (index, &size) in sizes.iter().enumerate() {
        if size > max {
            shards.push(vec![index]);
            continue;
        }
        if current_size + size > max {
            shards.push(std::mem::take(&mut current));
            current_size = 0;
        }
        current.push(index);
        current_size += size;
    }
    if !current.is_empty() {
        shards.push(current);
    }
    shards
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_hub_libraries() {
        let model = SetName::default();
        assert_eq!(model.shard(2, 4), "model-00002-of-00004.safetensors");
        assert_eq!(model.single(), "model.safetensors");
        assert_eq!(model.index(), "model.safetensors.index.json");
        let fp16 =
            SetName::of_index("diffusion_pytorch_model.safetensors.index.fp16.json").unwrap();
        assert_eq!(fp16.prefix, "diffusion_pytorch_model");
        assert_eq!(fp16.variant.as_deref(), Some("fp16"));
        assert_eq!(
            fp16.shard(1, 2),
            "diffusion_pytorch_model.fp16-00001-of-00002.safetensors"
        );
        assert_eq!(
            fp16.index(),
            "diffusion_pytorch_model.safetensors.index.fp16.json"
        );
        for name in [
            "model.safetensors",
            "model.json",
            ".safetensors.index.json",
            "model.safetensors.index..json",
            "model.safetensors.index.a.b.json",
            "pytorch_model.bin.index.json",
        ] {
            assert!(!is_index_name(name), "{name}");
        }
        assert_eq!(shard_number("model-00012-of-00020.safetensors"), Some(12));
        assert_eq!(shard_number("model.safetensors"), None);
        for shard in [
            "model-00001-of-00004.safetensors",
            "model-123456-of-123456.safetensors",
        ] {
            assert!(model.is_shard_name(shard), "{shard}");
        }
        assert!(fp16.is_shard_name("diffusion_pytorch_model.fp16-00001-of-00002.safetensors"));
        for other in [
            "config.json",
            "model.safetensors",
            "model.safetensors.index.json",
            "model-0001-of-00004.safetensors",
            "model-00001-of-00004.bin",
            "model-00001-of-0000x.safetensors",
            "model-00001-00004.safetensors",
            "other-00001-of-00004.safetensors",
            "sub/model-00001-of-00004.safetensors",
            "../model-00001-of-00004.safetensors",
            "model-00001-of-00004.safetensors/x",
            "model.fp16-00001-of-00002.safetensors",
        ] {
            assert!(!model.is_shard_name(other), "{other}");
        }
    }

    #[test]
    fn pytorch_set_indexes_are_told_by_name_and_their_shards_numbered() {
        for name in [
            "pytorch_model.bin.index.json",
            "pytorch_model.bin.index.fp16.json",
            "diffusion_pytorch_model.bin.index.json",
        ] {
            assert!(is_pickle_index_name(name), "{name}");
            // Not a safetensors index: a set tjoin writes is never named so.
            assert!(!is_index_name(name), "{name}");
        }
        for name in [
            "pytorch_model.bin",
            ".bin.index.json",
            "pytorch_model.bin.index..json",
            "model.safetensors.index.json",
            "pytorch_model.bin.json",
        ] {
            assert!(!is_pickle_index_name(name), "{name}");
        }
        assert_eq!(shard_number("pytorch_model-00003-of-00004.bin"), Some(3));
        assert_eq!(shard_number("pytorch_model.bin"), None);
    }

    #[test]
    fn the_index_is_written_as_python_dumps_it() {
        let map = vec![
            (
                "b".to_string(),
                "model-00002-of-00002.safetensors".to_string(),
            ),
            (
                "a\u{e9}\u{1F600}\"".to_string(),
                "model-00001-of-00002.safetensors".to_string(),
            ),
        ];
        assert_eq!(
            write(24, &map),
            "{\n  \"metadata\": {\n    \"total_size\": 24\n  },\n  \"weight_map\": {\n    \
             \"a\\u00e9\\ud83d\\ude00\\\"\": \"model-00001-of-00002.safetensors\",\n    \
             \"b\": \"model-00002-of-00002.safetensors\"\n  }\n}\n"
        );
        assert_eq!(
            write(0, &[]),
            "{\n  \"metadata\": {\n    \"total_size\": 0\n  },\n  \"weight_map\": {}\n}\n"
        );
    }

    #[test]
    fn an_index_reads_back_and_a_name_listed_twice_is_refused() {
        let map = vec![("w".to_string(), "f.safetensors".to_string())];
        let index = parse(write(8, &map).as_bytes()).unwrap();
        assert_eq!(index.total_size, Some(8));
        assert_eq!(index.weight_map, map);
        let twice = br#"{"weight_map": {"w": "a.safetensors", "w": "b.safetensors"}}"#;
        let map = parse(twice).unwrap().weight_map;
        assert_eq!(
            map.len(),
            2,
            "both entries are kept for the caller to report"
        );
        assert!(
            parse(br#"{"metadata": {}}"#)
                .unwrap_err()
                .contains("no weight_map")
        );
        assert!(parse(b"{").is_err());
        let float = br#"{"metadata": {"total_size": 16.0}, "weight_map": {}}"#;
        assert_eq!(parse(float).unwrap().total_size, Some(16));
    }

    #[test]
    fn the_split_is_huggingface_hubs() {
        // The docstring's example: a limit of 10 and sizes [6, 6, 2, 6, 2, 2].
        assert_eq!(
            split(&[6, 6, 2, 6, 2, 2], 10),
            [vec![0], vec![1, 2], vec![3, 4, 5]]
        );
        // A tensor over the limit goes ahead of the shard being filled.
        assert_eq!(split(&[3, 20, 3, 5], 10), [vec![1], vec![0, 2], vec![3]]);
        assert_eq!(split(&[], 10), Vec::<Vec<usize>>::new());
        assert_eq!(split(&[0, 0], 0), [vec![0, 1]]);
    }
}
