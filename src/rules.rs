//! Which tensors a whole-file join treats how: the `--axis-for GLOB=AXIS` rules and the
//! shell-style glob matching of tensor names that they and `--keep` use.

/// `--axis-for GLOB=AXIS`: tensors whose names match `glob` join along `axis`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AxisRule {
    /// The pattern tensor names are matched against.
    pub glob: String,
    /// The axis, possibly negative.
    pub axis: i64,
}

impl std::str::FromStr for AxisRule {
    type Err = String;

    /// Parses `GLOB=AXIS`, splitting at the last `=` so that globs may hold one.
    fn from_str(text: &str) -> Result<AxisRule, String> {
        let (glob, axis) = text
            .rsplit_once('=')
            .ok_or("expected GLOB=AXIS, e.g. '*.o_proj.weight=1'")?;
        let axis = axis.trim().parse().map_err(|_| {
            format!("`{axis}` is not an axis; expected GLOB=AXIS, e.g. '*.o_proj.weight=1'")
        })?;
        Ok(AxisRule {
            glob: glob.to_string(),
            axis,
        })
    }
}

/// Shell-style matching of a tensor name: `*` matches any text (dots included), `?` one
/// character, anything else itself.
pub fn glob_match(glob: &str, name: &str) -> bool {
    let (glob, name): (Vec<char>, Vec<char>) = (glob.chars().collect(), name.chars().collect());
    // Iterative matching with backtracking to the last star: linear in practice.
    let (mut g, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        match glob.get(g) {
            Some('*') => {
                star = Some((g, n));
                g += 1;
            }
            Some(&c) if c == '?' || c == name[n] => {
                g += 1;
                n += 1;
            }
            _ => match star {
                Some((sg, sn)) => {
                    g = sg + 1;
                    n = sn + 1;
                    star = Some((sg, sn + 1));
                }
                None => return false,
            },
        }
    }
    glob[g..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_rules_split_at_the_last_equals_sign() {
        let rule = "a=b*=-1".parse::<AxisRule>().unwrap();
        assert_eq!((rule.glob.as_str(), rule.axis), ("a=b*", -1));
        assert!("*.weight".parse::<AxisRule>().is_err());
        assert!("*.weight=x".parse::<AxisRule>().is_err());
    }

    #[test]
    fn globs_match_like_a_shell() {
        assert!(glob_match(
            "*.o_proj.weight",
            "model.layers.0.self_attn.o_proj.weight"
        ));
        assert!(glob_match("*norm*", "model.norm.weight"));
        assert!(glob_match("layer?.w", "layer1.w"));
        assert!(!glob_match("layer?.w", "layer10.w"));
        assert!(glob_match("*", ""));
        assert!(!glob_match("a*b", "ac"));
        assert!(glob_match("a*b*c", "aXbYbZc"));
        assert!(!glob_match("*.bias", "x.weight"));
    }
}
