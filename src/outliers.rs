//! Messages about many inputs. One bad shard among thousands is named on the first line of
//! its refusal, not found at line 1,237 of a list of every input: the inputs are split by the
//! property a rule compares (element type, rank, sizes outside the axis, the names of the
//! tensors a file holds) into the value most of them share and the inputs that differ from
//! it, and a message lists at most about [`ROWS`] inputs: those that differ first, then one
//! that agrees, then a count of the rest.

/// The most inputs a message lists one by one (with a few lines counting the rest); a list
/// of up to this many is shown whole, in input order.
pub const ROWS: usize = 10;

/// Differing inputs named one by one in a headline or a hint; more are counted.
const NAMED: usize = 3;

/// How one property splits the inputs, when more than half of them, and at least two, share
/// one value and some do not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split {
    /// The first input (an index) that holds the shared value: the one the others are
    /// compared with.
    pub reference: usize,
    /// How many inputs hold the shared value.
    pub agreeing: usize,
    /// The inputs that do not, in input order.
    pub outliers: Vec<usize>,
}

/// Splits inputs by `keys` (one per input) into a majority and its outliers; `None` when
/// every input agrees or no value is held by more than half of them (two inputs that differ
/// have no outlier: either could be the odd one).
pub fn split<K: PartialEq>(keys: &[K]) -> Option<Split> {
    // Boyer and Moore's vote finds the only value that can hold a majority, without hashing.
    let mut candidate = 0;
    let mut votes = 0usize;
    for (i, key) in keys.iter().enumerate() {
        if votes == 0 {
            candidate = i;
            votes = 1;
        } else if keys[candidate] == *key {
            votes += 1;
        } else {
            votes -= 1;
        }
    }
    let (agreeing, outliers): (Vec<usize>, Vec<usize>) =
        (0..keys.len()).partition(|&i| keys[i] == keys[candidate]);
    let majority = agreeing.len() >= 2 && agreeing.len() * 2 > keys.len();
    (majority && !outliers.is_empty()).then(|| Split {
        reference: agreeing[0],
        agreeing: agreeing.len(),
        outliers,
    })
}

impl Split {
    /// "input 1237 (shard-01236.npy) has shape [5, 127]; the other 1,999 inputs have
    /// [*, 128]": `describe` says what a differing input has (after its name), `shared` what
    /// the others have ("have [*, 128]").
    pub fn headline(&self, describe: impl Fn(usize) -> String, shared: &str) -> String {
        let named: Vec<String> = self
            .outliers
            .iter()
            .take(NAMED)
            .map(|&i| describe(i))
            .collect();
        let differ = if self.outliers.len() <= NAMED {
            and_list(&named)
        } else {
            format!(
                "{}, and {} more inputs differ",
                named[0],
                thousands(self.outliers.len() - 1)
            )
        };
        format!(
            "{differ}; the other {} inputs {shared}",
            thousands(self.agreeing)
        )
    }

    /// "remove or fix input 1237 (shard-01236.npy)", naming up to three of the differing
    /// inputs by `name` and counting more.
    pub fn remove_or_fix(&self, name: impl Fn(usize) -> String) -> String {
        if self.outliers.len() <= NAMED {
            let names: Vec<String> = self.outliers.iter().map(|&i| name(i)).collect();
            format!("remove or fix {}", and_list(&names))
        } else {
            format!(
                "remove or fix the {} inputs that differ (the first is {})",
                thousands(self.outliers.len()),
                name(self.outliers[0])
            )
        }
    }
}

/// One line of a list of inputs: an input, or a line that counts those left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Row {
    /// The input at this index.
    Input(usize),
    /// This many more inputs that differ, left out.
    MoreDiffering(usize),
    /// This many more inputs like the input at `like`, left out.
    MoreLike {
        /// How many.
        count: usize,
        /// The input they are like (an index).
        like: usize,
    },
    /// This many more inputs, left out.
    More(usize),
}

impl Row {
    /// The line of a left-out count ("... and 1,998 more like input 1"), given the position
    /// (from 1) of each input; `None` for an input, which its caller writes.
    pub fn count_text(&self, position: impl Fn(usize) -> usize) -> Option<String> {
        match *self {
            Row::Input(_) => None,
            Row::MoreDiffering(count) => {
                Some(format!("... and {} more that differ", thousands(count)))
            }
            Row::MoreLike { count, like } => Some(format!(
                "... and {} more like input {}",
                thousands(count),
                position(like)
            )),
            Row::More(count) => Some(format!("... and {} more", thousands(count))),
        }
    }
}

/// Which of `count` inputs a message lists: all of them, in order, when there are at most
/// [`ROWS`]; otherwise the `offenders` first (the inputs a message is about, in order), then
/// the first other input as the reference, with lines that count the rest.
pub fn rows(count: usize, offenders: &[usize]) -> Vec<Row> {
    if count <= ROWS {
        return (0..count).map(Row::Input).collect();
    }
    let shown = offenders.len().min(ROWS - 2);
    let mut rows: Vec<Row> = offenders[..shown].iter().map(|&i| Row::Input(i)).collect();
    if offenders.len() > shown {
        rows.push(Row::MoreDiffering(offenders.len() - shown));
    }
    let reference = (0..count).find(|i| !offenders.contains(i));
    match (reference, offenders.is_empty()) {
        (None, _) => {}
        (Some(_), true) => {
            rows.extend((0..ROWS - 1).map(Row::Input));
            rows.push(Row::More(count - (ROWS - 1)));
        }
        (Some(like), false) => {
            rows.push(Row::Input(like));
            let rest = count - offenders.len() - 1;
            if rest > 0 {
                rows.push(Row::MoreLike { count: rest, like });
            }
        }
    }
    rows
}

/// `items` as a bounded list: "a", "a, b", "a, b, c", and past three "a, b, c and 1,997
/// more".
pub fn bounded_list(items: &[String]) -> String {
    if items.len() <= NAMED {
        items.join(", ")
    } else {
        format!(
            "{} and {} more",
            items[..NAMED].join(", "),
            thousands(items.len() - NAMED)
        )
    }
}

/// "a", "a and b", "a, b and c".
fn and_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// `n` with thousands separated by commas: 1,999.
pub fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_majority_has_more_than_half_and_at_least_two() {
        assert_eq!(
            split(&[1, 1, 2, 1]),
            Some(Split {
                reference: 0,
                agreeing: 3,
                outliers: vec![2]
            })
        );
        assert_eq!(
            split(&[2, 1, 1]),
            Some(Split {
                reference: 1,
                agreeing: 2,
                outliers: vec![0]
            })
        );
        assert_eq!(split(&[1, 2]), None, "two that differ: no outlier");
        assert_eq!(split(&[1, 1, 2, 2]), None, "half is no majority");
        assert_eq!(split(&[1, 1, 1]), None, "nothing differs");
        assert_eq!(split::<u8>(&[]), None);
    }

    #[test]
    fn a_long_list_shows_the_offenders_then_a_reference_then_counts() {
        assert_eq!(rows(3, &[1]), [Row::Input(0), Row::Input(1), Row::Input(2)]);
        assert_eq!(
            rows(2000, &[1236]),
            [
                Row::Input(1236),
                Row::Input(0),
                Row::MoreLike {
                    count: 1998,
                    like: 0
                }
            ]
        );
        let many: Vec<usize> = (1..20).collect();
        let listed = rows(2000, &many);
        assert_eq!(listed.len(), ROWS + 1);
        assert_eq!(listed[ROWS - 2], Row::MoreDiffering(11));
        assert_eq!(listed[ROWS - 1], Row::Input(0));
        let unmarked = rows(50, &[]);
        assert_eq!(unmarked.len(), ROWS);
        assert_eq!(unmarked[ROWS - 1], Row::More(41));
        let all: Vec<usize> = (0..50).collect();
        assert_eq!(rows(50, &all).last(), Some(&Row::MoreDiffering(42)));
    }

    #[test]
    fn headlines_name_the_few_and_count_the_many() {
        let one = Split {
            reference: 0,
            agreeing: 1999,
            outliers: vec![1236],
        };
        let describe = |i: usize| format!("input {} has shape [5, 127]", i + 1);
        assert_eq!(
            one.headline(describe, "have [*, 128]"),
            "input 1237 has shape [5, 127]; the other 1,999 inputs have [*, 128]"
        );
        let many = Split {
            outliers: vec![4, 8, 12, 16],
            agreeing: 1996,
            ..one
        };
        assert_eq!(
            many.headline(describe, "have [*, 128]"),
            "input 5 has shape [5, 127], and 3 more inputs differ; the other 1,996 inputs \
             have [*, 128]"
        );
        assert_eq!(
            many.remove_or_fix(|i| format!("input {}", i + 1)),
            "remove or fix the 4 inputs that differ (the first is input 5)"
        );
    }

    #[test]
    fn counts_and_lists_read_as_english() {
        assert_eq!(thousands(7), "7");
        assert_eq!(thousands(1999), "1,999");
        assert_eq!(thousands(1_234_567), "1,234,567");
        let items: Vec<String> = ["a", "b", "c", "d", "e"].map(String::from).to_vec();
        assert_eq!(bounded_list(&items[..1]), "a");
        assert_eq!(bounded_list(&items[..2]), "a, b");
        assert_eq!(bounded_list(&items[..3]), "a, b, c");
        assert_eq!(bounded_list(&items), "a, b, c and 2 more");
    }
}
