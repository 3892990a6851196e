//! `einsum`: Einstein summation, parsed from numpy's notation ("ij,jk->ik", "...ij->...ji",
//! implicit output "ij,jk"). Every operand is laid out over all the formula's letters (its
//! diagonal taken where a letter repeats in it, size 1 for letters it lacks), the operands are
//! multiplied, the letters not in the output are summed and the rest permuted into place: a
//! product and a reduce, which the scheduler fuses into one kernel (as `matmul`).

use super::Tensor;
use crate::error::{bail, Result};
use std::collections::BTreeMap;

/// One side of the formula: an operand's letters, with `...` replaced by `ell` letters.
fn letters(op: &str, term: &str, ell: &[char]) -> Result<Vec<char>> {
    let mut out = vec![];
    let mut rest = term.trim();
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("...") {
            out.extend(ell);
            rest = r;
            continue;
        }
        let c = rest.chars().next().expect("non-empty");
        if !c.is_ascii_alphabetic() {
            bail!(
                Shape,
                "{op}: unexpected {c:?} in term {term:?} (letters and ... only)"
            );
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    Ok(out)
}

impl Tensor {
    /// Einstein summation over `operands` as numpy's `einsum` (without its optimizer options):
    /// letters name axes, a letter repeated in one term takes the diagonal, `...` stands for
    /// leading broadcast axes, and without `->` the output is the letters that appear once, in
    /// alphabetical order.
    pub fn einsum(formula: &str, operands: &[&Tensor]) -> Result<Tensor> {
        const OP: &str = "einsum";
        let (lhs, rhs) = match formula.split_once("->") {
            Some((l, r)) => (l, Some(r)),
            None => (formula, None),
        };
        let terms: Vec<&str> = lhs.split(',').collect();
        if terms.len() != operands.len() {
            bail!(
                Shape,
                "{OP}: {formula:?} has {} operand terms, got {} tensors",
                terms.len(),
                operands.len()
            );
        }
        // `...` stands for as many axes as the operand has beyond its letters (broadcast right).
        let named = |t: &str| {
            t.replace("...", "")
                .chars()
                .filter(char::is_ascii_alphabetic)
                .count()
        };
        let mut ell_n = 0;
        for (t, x) in terms.iter().zip(operands) {
            if t.contains("...") {
                let named = named(t);
                if x.ndim() < named {
                    bail!(
                        Shape,
                        "{OP}: term {t:?} names more axes than the tensor of shape {:?} has",
                        x.shape()
                    );
                }
                ell_n = ell_n.max(x.ndim() - named);
            }
        }
        // Fresh uppercase letters for the ellipsis (the formula's own are lowercase or upper).
        let used: Vec<char> = formula.chars().collect();
        let ell: Vec<char> = ('A'..='Z')
            .chain('a'..='z')
            .filter(|c| !used.contains(c))
            .take(ell_n)
            .collect();
        if ell.len() < ell_n {
            bail!(Shape, "{OP}: too many axes under ... in {formula:?}");
        }
        let mut ins = vec![];
        for (t, x) in terms.iter().zip(operands) {
            let k = if t.contains("...") {
                x.ndim() - named(t)
            } else {
                0
            };
            let l = letters(OP, t, &ell[ell_n - k..])?;
            if l.len() != x.ndim() {
                bail!(
                    Shape,
                    "{OP}: term {t:?} has {} letters for a tensor of shape {:?}",
                    l.len(),
                    x.shape()
                );
            }
            ins.push(l);
        }
        // The size of every letter (1 broadcasts).
        let mut size: BTreeMap<char, usize> = BTreeMap::new();
        for (l, x) in ins.iter().zip(operands) {
            for (&c, &n) in l.iter().zip(&x.shape()) {
                match size.get(&c) {
                    Some(&m) if m != n && m != 1 && n != 1 => bail!(
                        Shape,
                        "{OP}: axis {c:?} has sizes {m} and {n} in {formula:?}"
                    ),
                    Some(&m) if m >= n => {}
                    _ => {
                        size.insert(c, n);
                    }
                }
            }
        }
        let out: Vec<char> = match rhs {
            Some(r) => letters(OP, r, &ell)?,
            None => {
                let mut once: Vec<char> = size
                    .keys()
                    .copied()
                    .filter(|c| ins.iter().flatten().filter(|&&d| d == *c).count() == 1)
                    .filter(|c| !ell.contains(c))
                    .collect();
                once.sort();
                ell.iter().copied().chain(once).collect()
            }
        };
        for (i, c) in out.iter().enumerate() {
            if !size.contains_key(c) {
                bail!(
                    Shape,
                    "{OP}: output axis {c:?} is in no operand of {formula:?}"
                );
            }
            if out[..i].contains(c) {
                bail!(Shape, "{OP}: output axis {c:?} repeats in {formula:?}");
            }
        }
        // All letters: the output's, then the summed ones.
        let all: Vec<char> = out
            .iter()
            .copied()
            .chain(size.keys().copied().filter(|c| !out.contains(c)))
            .collect();
        let full: Vec<usize> = all.iter().map(|c| size[c]).collect();
        let mut product: Option<Tensor> = None;
        for (l, x) in ins.iter().zip(operands) {
            // A repeated letter: take the diagonal.
            let (mut x, mut l) = ((*x).clone(), l.clone());
            while let Some((i, j)) = (0..l.len())
                .flat_map(|i| (i + 1..l.len()).map(move |j| (i, j)))
                .find(|&(i, j)| l[i] == l[j])
            {
                x = x.diagonal(0, i as isize, j as isize)?;
                let c = l[i];
                l.remove(j);
                l.remove(i);
                l.push(c);
            }
            // Lay out over `all`: permute to its order, size 1 where absent.
            let mut order: Vec<isize> = vec![];
            let mut shape = vec![];
            for &c in &all {
                match l.iter().position(|&d| d == c) {
                    Some(p) => {
                        order.push(p as isize);
                        shape.push(x.shape()[p]);
                    }
                    None => shape.push(1),
                }
            }
            let y = x.permute(&order)?.reshape_u(&shape)?.broadcast_to(&full)?;
            product = Some(match product {
                None => y,
                Some(p) => p.mul(&y)?,
            });
        }
        let Some(p) = product else {
            bail!(Shape, "{OP}: no operands");
        };
        let summed: Vec<isize> = (out.len()..all.len()).map(|i| i as isize).collect();
        if summed.is_empty() {
            Ok(p)
        } else {
            p.sum(summed, false)
        }
    }
}
