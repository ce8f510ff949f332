//! The restricted pickle machine: opcodes in, a graph of data nodes out. Nothing is imported,
//! looked up by name or called: a global is one that [`super::globals`] allows or a refusal,
//! and "calling" one builds a node (a dict, a tuple, a tensor record) from its arguments. The
//! nodes and the other values it holds ([`Global`](super::value::Global) among them) are in
//! [`super::value`].
//!
//! Nodes live in one arena and the stack and memo hold their indexes, so that a container
//! put in the memo and filled later (`EMPTY_DICT`, `BINPUT`, `SETITEMS`: how every dict is
//! pickled) is the same container wherever it is fetched, as in Python. The machine never
//! recurses; the walk of its result ([`super::state`]) is bounded in depth.

use std::collections::HashMap;
use std::rc::Rc;

use super::globals::{self, Call};
use super::value::{FaultKind, Id, Items, Node, Step, damaged, kind_of, refused};

/// Bounds on what one pickle may make the machine do. Each is a refusal when passed.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Opcodes executed.
    pub opcodes: u64,
    /// Nodes made (every value, container and tensor record).
    pub nodes: usize,
    /// The highest memo index, and the number of memo entries.
    pub memo: u32,
    /// Marks open at once (`MARK` without its `TUPLE`, `SETITEMS`, ...).
    pub marks: usize,
    /// Bytes of one string or bytes value.
    pub string: u64,
    /// Bytes the machine holds, all counted: each node's slot in the arena and what it holds
    /// that no other node shares ([`Node::own_bytes`]: a string, a container's items, a
    /// tensor record), items added to containers (and a shared container's copy when one is
    /// changed), stack slots and memo entries.
    pub bytes: u64,
}

/// What one memo entry costs in the machine's count: its key and value in the hash map,
/// with the map's spare room.
const MEMO_ENTRY_BYTES: u64 = 24;

/// The limits tjoin reads checkpoints with. A state dict of 100,000 tensors takes about 3
/// million opcodes, 1.5 million nodes and 100 MiB of the machine's count of bytes; the
/// limits leave room for four times that while keeping the machine's memory under 1 GiB:
/// what it counts stays under `bytes` (512 MiB), and the vectors that hold it take at most
/// twice what they hold (the arena, the stack and the memo grow by doubling).
pub const LIMITS: Limits = Limits {
    opcodes: 200_000_000,
    nodes: 20_000_000,
    memo: 20_000_000,
    marks: 10_000,
    string: 64 << 20,
    bytes: 512 << 20,
};

/// Why the machine stopped: the opcode at fault, where it is, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    /// The byte offset of the opcode in the pickle.
    pub at: u64,
    /// The opcode, if the fault is one opcode's.
    pub opcode: Option<u8>,
    /// What is wrong, and whether it is damage or a refusal.
    pub kind: FaultKind,
}

impl Fault {
    /// The fault as a sentence: `opcode SETITEMS at byte 57: ...`.
    pub fn describe(&self) -> String {
        let what = match &self.kind {
            FaultKind::Damaged(what) | FaultKind::Refused(what) | FaultKind::CutShort(what) => what,
        };
        match self.opcode {
            Some(op) => format!("{} at byte {}: {what}", opcode_name(op), self.at),
            None => format!("at byte {}: {what}", self.at),
        }
    }

    /// Whether the pickle is damaged rather than refused.
    pub fn is_damage(&self) -> bool {
        !matches!(self.kind, FaultKind::Refused(_))
    }
}

/// The result of a pickle: its arena of nodes and the root node.
#[derive(Debug)]
pub struct Pickled {
    /// Every node made.
    pub nodes: Vec<Node>,
    /// The node `STOP` returned.
    pub root: Id,
    /// The bytes the pickle took, up to and including `STOP`.
    pub len: usize,
}

impl Pickled {
    /// The node at `id`.
    pub fn node(&self, id: Id) -> &Node {
        &self.nodes[id as usize]
    }
}

/// The machine's state while it runs.
struct Machine<'a> {
    bytes: &'a [u8],
    pos: usize,
    limits: Limits,
    nodes: Vec<Node>,
    stack: Vec<Id>,
    marks: Vec<usize>,
    memo: HashMap<u32, Id>,
    /// Bytes held, as [`Limits::bytes`] counts them.
    held: u64,
}

/// Runs the pickle at the start of `bytes` to its `STOP`, under `limits`.
pub fn run(bytes: &[u8], limits: Limits) -> Result<Pickled, Fault> {
    let mut machine = Machine {
        bytes,
        pos: 0,
        limits,
        nodes: Vec::new(),
        stack: Vec::new(),
        marks: Vec::new(),
        memo: HashMap::new(),
        held: 0,
    };
    let mut executed = 0u64;
    loop {
        let at = machine.pos;
        let Some(&op) = bytes.get(at) else {
            return Err(Fault {
                at: at as u64,
                opcode: None,
                kind: FaultKind::CutShort(
                    "the pickle ends before its STOP opcode: it is cut short".to_string(),
                ),
            });
        };
        machine.pos += 1;
        executed += 1;
        if executed > limits.opcodes {
            return Err(Fault {
                at: at as u64,
                opcode: Some(op),
                kind: FaultKind::Refused(format!(
                    "the pickle runs more than {} opcodes, tjoin's limit; no checkpoint needs \
                     that many",
                    limits.opcodes
                )),
            });
        }
        match machine.step(op) {
            Ok(Some(root)) => {
                return Ok(Pickled {
                    nodes: machine.nodes,
                    root,
                    len: machine.pos,
                });
            }
            Ok(None) => {}
            Err(kind) => {
                return Err(Fault {
                    at: at as u64,
                    opcode: Some(op),
                    kind,
                });
            }
        }
    }
}

// The opcodes, as Python's pickle.py names them.
const MARK: u8 = b'(';
const STOP: u8 = b'.';
const POP: u8 = b'0';
const POP_MARK: u8 = b'1';
const DUP: u8 = b'2';
const BINFLOAT: u8 = b'G';
const BININT: u8 = b'J';
const BININT1: u8 = b'K';
const BININT2: u8 = b'M';
const NONE: u8 = b'N';
const BINPERSID: u8 = b'Q';
const REDUCE: u8 = b'R';
const BINSTRING: u8 = b'T';
const SHORT_BINSTRING: u8 = b'U';
const BINUNICODE: u8 = b'X';
const APPEND: u8 = b'a';
const BUILD: u8 = b'b';
const GLOBAL: u8 = b'c';
const DICT: u8 = b'd';
const EMPTY_DICT: u8 = b'}';
const APPENDS: u8 = b'e';
const BINGET: u8 = b'h';
const LONG_BINGET: u8 = b'j';
const LIST: u8 = b'l';
const EMPTY_LIST: u8 = b']';
const BINPUT: u8 = b'q';
const LONG_BINPUT: u8 = b'r';
const SETITEM: u8 = b's';
const TUPLE: u8 = b't';
const EMPTY_TUPLE: u8 = b')';
const SETITEMS: u8 = b'u';
const PROTO: u8 = 0x80;
const NEWOBJ: u8 = 0x81;
const TUPLE1: u8 = 0x85;
const TUPLE2: u8 = 0x86;
const TUPLE3: u8 = 0x87;
const NEWTRUE: u8 = 0x88;
const NEWFALSE: u8 = 0x89;
const LONG1: u8 = 0x8a;
const LONG4: u8 = 0x8b;
const BINBYTES: u8 = b'B';
const SHORT_BINBYTES: u8 = b'C';
const SHORT_BINUNICODE: u8 = 0x8c;
const BINUNICODE8: u8 = 0x8d;
const BINBYTES8: u8 = 0x8e;
const EMPTY_SET: u8 = 0x8f;
const ADDITEMS: u8 = 0x90;
const FROZENSET: u8 = 0x91;
const NEWOBJ_EX: u8 = 0x92;
const STACK_GLOBAL: u8 = 0x93;
const MEMOIZE: u8 = 0x94;
const FRAME: u8 = 0x95;
const BYTEARRAY8: u8 = 0x96;

/// The name of an opcode, as `pickletools` prints it.
pub fn opcode_name(op: u8) -> String {
    let name = match op {
        MARK => "MARK",
        STOP => "STOP",
        POP => "POP",
        POP_MARK => "POP_MARK",
        DUP => "DUP",
        BINFLOAT => "BINFLOAT",
        BININT => "BININT",
        BININT1 => "BININT1",
        BININT2 => "BININT2",
        NONE => "NONE",
        BINPERSID => "BINPERSID",
        REDUCE => "REDUCE",
        BINSTRING => "BINSTRING",
        SHORT_BINSTRING => "SHORT_BINSTRING",
        BINUNICODE => "BINUNICODE",
        APPEND => "APPEND",
        BUILD => "BUILD",
        GLOBAL => "GLOBAL",
        DICT => "DICT",
        EMPTY_DICT => "EMPTY_DICT",
        APPENDS => "APPENDS",
        BINGET => "BINGET",
        LONG_BINGET => "LONG_BINGET",
        LIST => "LIST",
        EMPTY_LIST => "EMPTY_LIST",
        BINPUT => "BINPUT",
        LONG_BINPUT => "LONG_BINPUT",
        SETITEM => "SETITEM",
        TUPLE => "TUPLE",
        EMPTY_TUPLE => "EMPTY_TUPLE",
        SETITEMS => "SETITEMS",
        PROTO => "PROTO",
        NEWOBJ => "NEWOBJ",
        TUPLE1 => "TUPLE1",
        TUPLE2 => "TUPLE2",
        TUPLE3 => "TUPLE3",
        NEWTRUE => "NEWTRUE",
        NEWFALSE => "NEWFALSE",
        LONG1 => "LONG1",
        LONG4 => "LONG4",
        BINBYTES => "BINBYTES",
        SHORT_BINBYTES => "SHORT_BINBYTES",
        SHORT_BINUNICODE => "SHORT_BINUNICODE",
        BINUNICODE8 => "BINUNICODE8",
        BINBYTES8 => "BINBYTES8",
        EMPTY_SET => "EMPTY_SET",
        ADDITEMS => "ADDITEMS",
        FROZENSET => "FROZENSET",
        STACK_GLOBAL => "STACK_GLOBAL",
        MEMOIZE => "MEMOIZE",
        FRAME => "FRAME",
        BYTEARRAY8 => "BYTEARRAY8",
        b'I' => "INT",
        b'L' => "LONG",
        b'F' => "FLOAT",
        b'S' => "STRING",
        b'V' => "UNICODE",
        b'g' => "GET",
        b'p' => "PUT",
        b'P' => "PERSID",
        b'i' => "INST",
        b'o' => "OBJ",
        0x82 => "EXT1",
        0x83 => "EXT2",
        0x84 => "EXT4",
        0x92 => "NEWOBJ_EX",
        0x97 => "NEXT_BUFFER",
        0x98 => "READONLY_BUFFER",
        _ => return format!("opcode 0x{op:02x}"),
    };
    format!("opcode {name}")
}

impl<'a> Machine<'a> {
    /// Executes one opcode; `Some(root)` at `STOP`.
    #[expect(
        clippy::too_many_lines,
        reason = "one arm per opcode of the allowlist, each a few lines: the machine reads as \
                  the pickle opcode table does, and splitting it would scatter that table"
    )]
    fn step(&mut self, op: u8) -> Step<Option<Id>> {
        match op {
            PROTO => {
                let version = self.take(1)?[0];
                if !(2..=5).contains(&version) {
                    return refused(format!(
                        "the pickle is of protocol {version}; torch.save writes protocol 2 \
                         (tjoin reads 2 to 5)"
                    ));
                }
            }
            FRAME => {
                // A frame only announces how many bytes follow; they are read as they come.
                let len = self.u64()?;
                if len > (self.bytes.len() - self.pos) as u64 {
                    return Err(FaultKind::CutShort(format!(
                        "it announces a frame of {len} bytes, past the end of the pickle"
                    )));
                }
            }
            STOP => {
                let root = self.pop()?;
                return Ok(Some(root));
            }
            MARK => {
                if self.marks.len() >= self.limits.marks {
                    return refused(format!(
                        "the pickle opens more than {} marks at once, tjoin's limit on nesting",
                        self.limits.marks
                    ));
                }
                self.marks.push(self.stack.len());
            }
            POP => {
                // POP of a mark's place pops the mark, as Python's pickle does.
                if self.marks.last() == Some(&self.stack.len()) {
                    self.marks.pop();
                } else {
                    self.pop()?;
                }
            }
            POP_MARK => {
                self.pop_mark()?;
            }
            DUP => {
                let top = self.top()?;
                self.push_id(top)?;
            }
            NONE => self.push(Node::None)?,
            NEWTRUE => self.push(Node::Bool(true))?,
            NEWFALSE => self.push(Node::Bool(false))?,
            BININT => {
                let v = i32::from_le_bytes(self.array()?);
                self.push(Node::Int(v.into()))?;
            }
            BININT1 => {
                let v = self.take(1)?[0];
                self.push(Node::Int(v.into()))?;
            }
            BININT2 => {
                let v = u16::from_le_bytes(self.array()?);
                self.push(Node::Int(v.into()))?;
            }
            LONG1 => {
                let n = u64::from(self.take(1)?[0]);
                let bytes = self.take_counted(n)?;
                let node = long(bytes);
                self.push(node)?;
            }
            LONG4 => {
                let n = i32::from_le_bytes(self.array()?);
                let Ok(n) = u64::try_from(n) else {
                    return damaged(format!("LONG4 declares a negative length, {n}"));
                };
                let bytes = self.take_counted(n)?;
                let node = long(bytes);
                self.push(node)?;
            }
            BINFLOAT => {
                let v = f64::from_be_bytes(self.array()?);
                self.push(Node::Float(v))?;
            }
            BINUNICODE | SHORT_BINUNICODE | BINUNICODE8 => {
                let n = self.length(op)?;
                let bytes = self.take_counted(n)?;
                let Ok(text) = std::str::from_utf8(bytes) else {
                    return damaged("a string is not valid UTF-8");
                };
                self.push(Node::Str(text.into()))?;
            }
            BINSTRING | SHORT_BINSTRING => {
                // Python 2's str: text when it is, bytes otherwise.
                let n = self.length(op)?;
                let bytes = self.take_counted(n)?;
                let node = match std::str::from_utf8(bytes) {
                    Ok(text) => Node::Str(text.into()),
                    Err(_) => Node::Bytes(bytes.into()),
                };
                self.push(node)?;
            }
            BINBYTES | SHORT_BINBYTES | BINBYTES8 | BYTEARRAY8 => {
                let n = self.length(op)?;
                let bytes = self.take_counted(n)?;
                self.push(Node::Bytes(bytes.into()))?;
            }
            EMPTY_TUPLE => self.push(Node::Tuple(Items::default()))?,
            TUPLE => {
                let items = self.pop_mark()?;
                self.push(Node::Tuple(items.into()))?;
            }
            TUPLE1 | TUPLE2 | TUPLE3 => {
                let n = usize::from(op - TUPLE1 + 1);
                let items = self.pop_n(n)?;
                self.push(Node::Tuple(items.into()))?;
            }
            EMPTY_LIST => self.push(Node::List(Items::default()))?,
            LIST => {
                let items = self.pop_mark()?;
                self.push(Node::List(items.into()))?;
            }
            APPEND => {
                let item = self.pop()?;
                let list = self.top()?;
                self.extend_items(list, vec![item], "APPEND")?;
            }
            APPENDS => {
                let items = self.pop_mark()?;
                let list = self.top()?;
                self.extend_items(list, items, "APPENDS")?;
            }
            EMPTY_DICT => self.push(Node::Dict(Default::default()))?,
            DICT => {
                let items = self.pop_mark()?;
                let entries = pairs(&items)?;
                self.push(Node::Dict(entries.into()))?;
            }
            SETITEM => {
                let value = self.pop()?;
                let key = self.pop()?;
                let dict = self.top()?;
                self.extend_entries(dict, vec![(key, value)], "SETITEM")?;
            }
            SETITEMS => {
                let items = self.pop_mark()?;
                let entries = pairs(&items)?;
                let dict = self.top()?;
                self.extend_entries(dict, entries, "SETITEMS")?;
            }
            EMPTY_SET => self.push(Node::Set(Items::default()))?,
            ADDITEMS => {
                let items = self.pop_mark()?;
                let set = self.top()?;
                self.extend_items(set, items, "ADDITEMS")?;
            }
            FROZENSET => {
                let items = self.pop_mark()?;
                self.push(Node::Set(items.into()))?;
            }
            BINPUT => {
                let index = u32::from(self.take(1)?[0]);
                self.put(index)?;
            }
            LONG_BINPUT => {
                let index = u32::from_le_bytes(self.array()?);
                self.put(index)?;
            }
            MEMOIZE => {
                let index = u32::try_from(self.memo.len()).unwrap_or(u32::MAX);
                self.put(index)?;
            }
            BINGET => {
                let index = u32::from(self.take(1)?[0]);
                self.get(index)?;
            }
            LONG_BINGET => {
                let index = u32::from_le_bytes(self.array()?);
                self.get(index)?;
            }
            GLOBAL => {
                let module = self.line()?;
                let name = self.line()?;
                let global = globals::resolve(&module, &name)?;
                self.push(Node::Global(global))?;
            }
            STACK_GLOBAL => {
                let name = self.pop()?;
                let module = self.pop()?;
                let (Node::Str(module), Node::Str(name)) = (self.node(module), self.node(name))
                else {
                    return damaged("STACK_GLOBAL takes two strings, a module and a name");
                };
                let global = globals::resolve(module, name)?;
                self.push(Node::Global(global))?;
            }
            REDUCE => {
                let args = self.pop()?;
                let callee = self.pop()?;
                let node = self.call(callee, args, "REDUCE")?;
                self.push(node)?;
            }
            NEWOBJ => {
                let args = self.pop()?;
                let class = self.pop()?;
                let node = self.call(class, args, "NEWOBJ")?;
                self.push(node)?;
            }
            BUILD => {
                let state = self.pop()?;
                let target = self.top()?;
                self.build(target, state)?;
            }
            BINPERSID => {
                let pid = self.pop()?;
                let storage = globals::persistent_load(&self.nodes, pid)?;
                self.push(Node::Storage(Box::new(storage)))?;
            }
            b'I' | b'L' | b'F' | b'S' | b'V' | b'g' | b'p' | b'P' | b'i' | b'o' => {
                return refused(
                    "it is an opcode of the text protocols (0 and 1), which torch.save never \
                     writes; tjoin reads protocols 2 to 5",
                );
            }
            0x82..=0x84 => {
                return refused(
                    "it names a global through the copyreg extension registry, which a \
                     checkpoint never needs",
                );
            }
            NEWOBJ_EX => {
                let kwargs = self.pop()?;
                let args = self.pop()?;
                let class = self.pop()?;
                let Node::Tuple(args) = self.node(args).clone() else {
                    return damaged(format!(
                        "NEWOBJ_EX gives the arguments {}, not a tuple",
                        kind_of(self.node(args))
                    ));
                };
                let node =
                    globals::new_object(&self.nodes, class, args, Some(kwargs), "NEWOBJ_EX")?;
                self.push(node)?;
            }
            0x97 | 0x98 => {
                return refused(
                    "it takes an out-of-band buffer, which a pickle stored in a file cannot \
                     hold",
                );
            }
            _ => return damaged("it is not a pickle opcode"),
        }
        Ok(None)
    }

    /// The node at `id`.
    fn node(&self, id: Id) -> &Node {
        &self.nodes[id as usize]
    }

    /// Adds a node to the arena.
    fn add(&mut self, node: Node) -> Step<Id> {
        if self.nodes.len() >= self.limits.nodes {
            return refused(format!(
                "the pickle makes more than {} values, tjoin's limit; no checkpoint needs that \
                 many",
                self.limits.nodes
            ));
        }
        self.hold(size_of::<Node>() as u64 + node.own_bytes())?;
        self.nodes.push(node);
        Ok((self.nodes.len() - 1) as Id)
    }

    /// Counts `bytes` more held, refusing the pickle past [`Limits::bytes`].
    fn hold(&mut self, bytes: u64) -> Step<()> {
        self.held = self.held.saturating_add(bytes);
        if self.held > self.limits.bytes {
            return refused(format!(
                "the pickle makes tjoin hold more than {} bytes of values, its limit; a \
                 checkpoint's pickle needs a fraction of that (its values are shared or copied \
                 more than any torch.save writes)",
                self.limits.bytes
            ));
        }
        Ok(())
    }

    fn push(&mut self, node: Node) -> Step<()> {
        let id = self.add(node)?;
        self.push_id(id)
    }

    /// Pushes a node already made (`DUP`, a memo fetch): a stack slot, counted.
    fn push_id(&mut self, id: Id) -> Step<()> {
        self.hold(size_of::<Id>() as u64)?;
        self.stack.push(id);
        Ok(())
    }

    fn floor(&self) -> usize {
        self.marks.last().copied().unwrap_or(0)
    }

    fn pop(&mut self) -> Step<Id> {
        if self.stack.len() <= self.floor() {
            return damaged("it takes a value from an empty stack");
        }
        Ok(self.stack.pop().unwrap_or_default())
    }

    fn top(&self) -> Step<Id> {
        if self.stack.len() <= self.floor() {
            return damaged("it needs a value on the stack and there is none");
        }
        Ok(self.stack.last().copied().unwrap_or_default())
    }

    fn pop_n(&mut self, n: usize) -> Step<Vec<Id>> {
        if self.stack.len() < self.floor() + n {
            return damaged(format!("it takes {n} values from a stack that has fewer"));
        }
        Ok(self.stack.split_off(self.stack.len() - n))
    }

    fn pop_mark(&mut self) -> Step<Vec<Id>> {
        let Some(mark) = self.marks.pop() else {
            return damaged("it needs a MARK and there is none");
        };
        Ok(self.stack.split_off(mark))
    }

    fn put(&mut self, index: u32) -> Step<()> {
        if index >= self.limits.memo {
            return refused(format!(
                "it stores at memo index {index}, past tjoin's limit of {}",
                self.limits.memo
            ));
        }
        if self.memo.len() >= self.limits.memo as usize && !self.memo.contains_key(&index) {
            return refused(format!(
                "the pickle stores more than {} memo entries, tjoin's limit",
                self.limits.memo
            ));
        }
        let top = self.top()?;
        if self.memo.insert(index, top).is_none() {
            self.hold(MEMO_ENTRY_BYTES)?;
        }
        Ok(())
    }

    fn get(&mut self, index: u32) -> Step<()> {
        let Some(&id) = self.memo.get(&index) else {
            return damaged(format!(
                "it fetches memo index {index}, which holds nothing"
            ));
        };
        self.push_id(id)
    }

    fn take(&mut self, n: usize) -> Step<&'a [u8]> {
        let bytes: &'a [u8] = self.bytes;
        let rest = &bytes[self.pos..];
        if rest.len() < n {
            return Err(FaultKind::CutShort(
                "the pickle ends in the middle of this opcode's argument".to_string(),
            ));
        }
        self.pos += n;
        Ok(&rest[..n])
    }

    /// `n` bytes of a string's body, after checking `n` against the limit.
    fn take_counted(&mut self, n: u64) -> Step<&'a [u8]> {
        if n > self.limits.string {
            return refused(format!(
                "it holds a string of {n} bytes, past tjoin's limit of {}",
                self.limits.string
            ));
        }
        let n = usize::try_from(n).unwrap_or(usize::MAX);
        self.take(n)
    }

    fn array<const N: usize>(&mut self) -> Step<[u8; N]> {
        let bytes = self.take(N)?;
        Ok(bytes.try_into().unwrap_or([0; N]))
    }

    fn u64(&mut self) -> Step<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// The length before a string's body, in the width its opcode gives it.
    fn length(&mut self, op: u8) -> Step<u64> {
        Ok(match op {
            SHORT_BINUNICODE | SHORT_BINSTRING | SHORT_BINBYTES => u64::from(self.take(1)?[0]),
            BINUNICODE | BINBYTES => u64::from(u32::from_le_bytes(self.array()?)),
            BINSTRING => {
                let n = i32::from_le_bytes(self.array()?);
                u64::try_from(n)
                    .or_else(|_| damaged(format!("it declares a negative length, {n}")))?
            }
            _ => self.u64()?,
        })
    }

    /// A line of `GLOBAL`'s argument, without its newline.
    fn line(&mut self) -> Step<String> {
        let rest = &self.bytes[self.pos..];
        let Some(end) = rest.iter().take(1024).position(|&b| b == b'\n') else {
            if rest.len() < 1024 {
                return Err(FaultKind::CutShort(
                    "the pickle ends in the middle of a global's name".to_string(),
                ));
            }
            return damaged("its module or name has no newline within 1,024 bytes");
        };
        self.pos += end + 1;
        match std::str::from_utf8(&rest[..end]) {
            Ok(text) => Ok(text.to_string()),
            Err(_) => damaged("its module or name is not valid UTF-8"),
        }
    }

    /// Appends `more` to the list (or, for `ADDITEMS`, the set) `id`: counted, and a list
    /// shared with another node copied first (the copy counted too).
    fn extend_items(&mut self, id: Id, more: Vec<Id>, op: &str) -> Step<()> {
        let items = match &self.nodes[id as usize] {
            Node::List(items) if op != "ADDITEMS" => items,
            Node::Set(items) if op == "ADDITEMS" => items,
            other => {
                let (verb, kind) = if op == "ADDITEMS" {
                    ("adds to", "a set")
                } else {
                    ("appends to", "a list")
                };
                return refused(format!(
                    "{op} {verb} {}, not to {kind}: the pickle is malformed or hostile",
                    kind_of(other)
                ));
            }
        };
        let copied = if Rc::strong_count(items) > 1 {
            items.len()
        } else {
            0
        };
        self.hold(((copied + more.len()) * size_of::<Id>()) as u64)?;
        if let Node::List(items) | Node::Set(items) = &mut self.nodes[id as usize] {
            Rc::make_mut(items).extend(more);
        }
        Ok(())
    }

    /// Sets `more` entries of the dict `id`, counted as [`Machine::extend_items`] counts.
    fn extend_entries(&mut self, id: Id, more: Vec<(Id, Id)>, op: &str) -> Step<()> {
        let Node::Dict(entries) = &self.nodes[id as usize] else {
            return refused(format!(
                "{op} sets items of {}, not of a dict: the pickle is malformed or hostile",
                kind_of(&self.nodes[id as usize])
            ));
        };
        let copied = if Rc::strong_count(entries) > 1 {
            entries.len()
        } else {
            0
        };
        self.hold(((copied + more.len()) * size_of::<(Id, Id)>()) as u64)?;
        if let Node::Dict(entries) = &mut self.nodes[id as usize] {
            Rc::make_mut(entries).extend(more);
        }
        Ok(())
    }

    /// `REDUCE` or `NEWOBJ` of `callee` with the tuple `args`.
    fn call(&mut self, callee: Id, args: Id, op: &str) -> Step<Node> {
        let Node::Global(global) = *self.node(callee) else {
            return refused(format!(
                "{op} calls {}, which is not a global: the pickle is malformed or hostile",
                kind_of(self.node(callee))
            ));
        };
        let Node::Tuple(args) = self.node(args).clone() else {
            return damaged(format!(
                "{op} gives {} the arguments {}, not a tuple",
                global.path(),
                kind_of(self.node(args))
            ));
        };
        globals::call(&self.nodes, global, args, Call::from_opcode(op))
    }

    /// `BUILD`: sets the state of `target`. An object of a data class records it (once).
    /// Dicts take attributes (a state dict's `_metadata`), tensors and parameters Python
    /// attributes: neither changes the data, so the state is dropped. Anything else is
    /// refused.
    fn build(&mut self, target: Id, state: Id) -> Step<()> {
        match &mut self.nodes[target as usize] {
            Node::Dict(_) | Node::Tensor(_) | Node::Unreadable(_) => Ok(()),
            Node::Object(object) => match object.state {
                None => {
                    object.state = Some(state);
                    Ok(())
                }
                Some(_) => refused(format!(
                    "BUILD sets the state of an object of class {} twice, which pickle never \
                     writes",
                    object.class.path()
                )),
            },
            other => refused(format!(
                "BUILD sets the state of {}, which only dicts, tensors and objects of data \
                 classes take",
                kind_of(other)
            )),
        }
    }
}

/// The entries of a flat list of keys and values.
fn pairs(items: &[Id]) -> Step<Vec<(Id, Id)>> {
    if items.len() % 2 != 0 {
        return damaged(format!(
            "it takes keys and values in pairs, and is given {} items",
            items.len()
        ));
    }
    Ok(items.chunks_exact(2).map(|kv| (kv[0], kv[1])).collect())
}

/// A little-endian two's complement integer, as `LONG1` and `LONG4` hold it.
fn long(bytes: &[u8]) -> Node {
    if bytes.len() > 16 {
        return Node::BigInt;
    }
    let fill = if bytes.last().is_some_and(|&b| b & 0x80 != 0) {
        0xff
    } else {
        0
    };
    let mut wide = [fill; 16];
    wide[..bytes.len()].copy_from_slice(bytes);
    Node::Int(i128::from_le_bytes(wide))
}
