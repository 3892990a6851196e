//! The rewrite engine: algebraic rules applied to every kernel-graph node as it is built
//! (constant folding, identities, index arithmetic with value bounds, and folding a one-hot
//! reduction into a direct load). A rule returns the node to use instead, or `None`. The
//! lowering also asks for a guarded load's index under its guard (`simplify_given`).

use super::{FastMap, KGraph, KOp, Node, Ref, Srcs, GIVEN_IDS};
use crate::dtype::DType;
use crate::ops::{compute_dtype, exec_binary, exec_cast, exec_unary, BinaryOp, ReduceOp, UnaryOp};
use crate::shape::INDEX;
use std::collections::HashMap;

/// Value bounds of a node (integers and bools; floats get infinite bounds).
pub fn bounds(g: &KGraph, n: &Node) -> (f64, f64) {
    const ANY: (f64, f64) = (f64::NEG_INFINITY, f64::INFINITY);
    if n.dtype.is_float() {
        return ANY;
    }
    let b = |i: usize| g.bounds[n.src[i] as usize];
    match &n.op {
        KOp::Const(bits) => {
            let v = f64::from_bits(*bits);
            (v, v)
        }
        KOp::Range { size, .. } => (0.0, (*size as f64 - 1.0).max(0.0)),
        KOp::Gidx | KOp::Lidx | KOp::Wgid => (0.0, f64::INFINITY),
        KOp::Binary(op) if op.is_cmp() => (0.0, 1.0),
        KOp::Binary(BinaryOp::Add) => {
            let (a, c) = (b(0), b(1));
            (a.0 + c.0, a.1 + c.1)
        }
        KOp::Binary(BinaryOp::Mul) => {
            let (a, c) = (b(0), b(1));
            let p = [a.0 * c.0, a.0 * c.1, a.1 * c.0, a.1 * c.1];
            if p.iter().any(|x| x.is_nan()) {
                return ANY;
            }
            (
                p.iter().cloned().fold(f64::INFINITY, f64::min),
                p.iter().cloned().fold(f64::NEG_INFINITY, f64::max),
            )
        }
        KOp::Binary(BinaryOp::Div) => {
            let (a, c) = (b(0), b(1));
            if c.0 == c.1 && c.0 > 0.0 && a.0 >= 0.0 {
                ((a.0 / c.0).floor(), (a.1 / c.0).floor())
            } else {
                ANY
            }
        }
        KOp::Binary(BinaryOp::Mod) => {
            let (a, c) = (b(0), b(1));
            if c.0 == c.1 && c.0 > 0.0 && a.0 >= 0.0 {
                (0.0, (c.0 - 1.0).min(a.1))
            } else {
                ANY
            }
        }
        KOp::Binary(BinaryOp::Max) => {
            let (a, c) = (b(0), b(1));
            (a.0.max(c.0), a.1.max(c.1))
        }
        KOp::Binary(BinaryOp::And) | KOp::Binary(BinaryOp::Or) if n.dtype == DType::Bool => {
            (0.0, 1.0)
        }
        KOp::Where => {
            let (a, c) = (b(1), b(2));
            (a.0.min(c.0), a.1.max(c.1))
        }
        KOp::StoreShared(_) | KOp::Sync => (0.0, 1.0),
        KOp::Load(_)
        | KOp::LoadShared(_)
        | KOp::SubgroupSum(_)
        | KOp::Cast
        | KOp::Reduce(_)
        | KOp::Unary(_)
        | KOp::Binary(_) => match n.dtype {
            DType::Bool => (0.0, 1.0),
            DType::U8 => (0.0, 255.0),
            _ => ANY,
        },
    }
}

/// A sum of `node * coefficient` terms plus a constant: the normal form for index arithmetic.
pub(crate) fn terms(g: &KGraph, r: Ref, coef: i64, out: &mut Vec<(Ref, i64)>, konst: &mut i64) {
    let n = g.node(r);
    match n.op {
        KOp::Const(bits) => *konst += coef * f64::from_bits(bits) as i64,
        KOp::Binary(BinaryOp::Add) => {
            terms(g, n.src[0], coef, out, konst);
            terms(g, n.src[1], coef, out, konst);
        }
        KOp::Binary(BinaryOp::Mul) if g.const_value(n.src[1]).is_some() => {
            let c = g.const_value(n.src[1]).unwrap_or(0.0) as i64;
            terms(g, n.src[0], coef * c, out, konst)
        }
        _ => out.push((r, coef)),
    }
}

fn is_const(g: &KGraph, r: Ref, v: f64) -> bool {
    g.const_value(r) == Some(v)
}

fn is_index(dt: DType) -> bool {
    dt == crate::shape::INDEX
}

/// Offer a node to the rewrite rules before it is inserted: constant folding, algebraic
/// identities, and index simplifications that use the operands' bounds. `Some` is an equal,
/// simpler node already in `g`; `None` keeps the node as it is.
pub fn simplify(g: &mut KGraph, op: &KOp, dtype: DType, src: &[Ref]) -> Option<Ref> {
    let consts: Option<Vec<f64>> = src.iter().map(|&s| g.const_value(s)).collect();
    // Constant folding.
    if let Some(c) = &consts {
        let v = match op {
            KOp::Unary(u) => Some(exec_unary(*u, compute_dtype(dtype), c[0])),
            KOp::Binary(b) => Some(exec_binary(
                *b,
                compute_dtype(g.node(src[0]).dtype),
                c[0],
                c[1],
            )),
            KOp::Where => Some(if c[0] != 0.0 { c[1] } else { c[2] }),
            KOp::Cast => Some(exec_cast(g.node(src[0]).dtype, dtype, c[0])),
            _ => None,
        };
        if let Some(v) = v {
            return Some(g.konst(v, dtype));
        }
    }
    match op {
        KOp::Cast if g.node(src[0]).dtype == dtype => Some(src[0]),
        KOp::Where => {
            if let Some(c) = g.const_value(src[0]) {
                return Some(if c != 0.0 { src[1] } else { src[2] });
            }
            (src[1] == src[2]).then_some(src[1])
        }
        KOp::Load(_) => {
            if is_const(g, src[1], 0.0) {
                return Some(g.konst(0.0, dtype));
            }
            None
        }
        KOp::Binary(b) => binary(g, *b, dtype, src[0], src[1]),
        KOp::Unary(UnaryOp::Neg) => {
            let n = g.node(src[0]).clone();
            (n.op == KOp::Unary(UnaryOp::Neg)).then(|| n.src[0])
        }
        KOp::Reduce(r) => reduce(g, *r, dtype, src),
        _ => None,
    }
}

fn binary(g: &mut KGraph, op: BinaryOp, dtype: DType, a: Ref, b: Ref) -> Option<Ref> {
    let int = is_index(dtype) || (op.is_cmp() && is_index(g.node(a).dtype));
    let (ba, bb) = (g.bounds[a as usize], g.bounds[b as usize]);
    match op {
        BinaryOp::Add | BinaryOp::Mul | BinaryOp::And | BinaryOp::Or | BinaryOp::Max
            if g.const_value(a).is_some() && g.const_value(b).is_none() =>
        {
            // Constants go on the right so the rules below see one shape.
            Some(g.binary(op, b, a))
        }
        BinaryOp::Add if is_const(g, b, 0.0) && (int || !dtype.is_float()) => Some(a),
        BinaryOp::Add if dtype.is_float() && is_const(g, b, 0.0) => Some(a),
        BinaryOp::Add if int => {
            let (mut ts, mut k) = (vec![], 0i64);
            terms(g, a, 1, &mut ts, &mut k);
            terms(g, b, 1, &mut ts, &mut k);
            // Fold (x + c1) + c2 and merge equal terms.
            let mut merged: Vec<(Ref, i64)> = vec![];
            for (r, c) in ts {
                match merged.iter_mut().find(|(m, _)| *m == r) {
                    Some(m) => m.1 += c,
                    None => merged.push((r, c)),
                }
            }
            let recombined = recombine(g, &mut merged);
            let parts = merged.iter().filter(|t| t.1 != 0).count() + (k != 0) as usize;
            if !recombined && parts >= count_leaves(g, a) + count_leaves(g, b) {
                return None;
            }
            Some(build_sum(g, &merged, k))
        }
        BinaryOp::Mul if is_const(g, b, 1.0) => Some(a),
        BinaryOp::Mul if int && is_const(g, b, 0.0) => Some(b),
        BinaryOp::Mul if int && g.const_value(b).is_some() => {
            let c = g.const_value(b)? as i64;
            let an = g.node(a).clone();
            match an.op {
                // (x * c1) * c2 -> x * (c1 * c2)
                KOp::Binary(BinaryOp::Mul) if g.const_value(an.src[1]).is_some() => {
                    let c1 = g.const_value(an.src[1])? as i64;
                    let k = g.int(c * c1);
                    Some(g.mul(an.src[0], k))
                }
                // (x + y) * c -> x * c + y * c, so that / and % see the terms.
                KOp::Binary(BinaryOp::Add) => {
                    let (mut ts, mut k) = (vec![], 0i64);
                    terms(g, a, c, &mut ts, &mut k);
                    Some(build_sum(g, &ts, k))
                }
                _ => None,
            }
        }
        BinaryOp::Div if is_const(g, b, 1.0) => Some(a),
        BinaryOp::Div if int && g.const_value(b).is_some_and(|c| c > 0.0) && ba.0 >= 0.0 => {
            let d = g.const_value(b)? as i64;
            if ba.1 < d as f64 {
                return Some(g.int(0));
            }
            let an = g.node(a).clone();
            // (x / c1) / c2 -> x / (c1 * c2)
            if an.op == KOp::Binary(BinaryOp::Div) {
                if let Some(c1) = g.const_value(an.src[1]) {
                    let k = g.int(c1 as i64 * d);
                    return Some(g.div(an.src[0], k));
                }
            }
            let (mut ts, mut k) = (vec![], 0i64);
            terms(g, a, 1, &mut ts, &mut k);
            if k < 0
                || ts
                    .iter()
                    .any(|&(r, c)| c < 0 || g.bounds[r as usize].0 < 0.0)
            {
                return None;
            }
            // A factor f every coefficient shares with d divides out: with S a multiple of f
            // and r = k % f < f, (S + k) / d = (S / f + k / f) / (d / f). (An upcast lane's
            // index g*u + lane through a reshape divides by a multiple of u.)
            let f = ts.iter().fold(d, |f, t| gcd(f, t.1));
            if f > 1 && !ts.is_empty() {
                let scaled: Vec<(Ref, i64)> = ts.iter().map(|&(r, c)| (r, c / f)).collect();
                let s = build_sum(g, &scaled, k / f);
                let dd = g.int(d / f);
                return Some(g.div(s, dd));
            }
            if let Some((f, hi, _)) = split_by_factor(g, &ts, k, d) {
                let dd = g.int(d / f);
                return Some(g.div(hi, dd));
            }
            // Split every coefficient c = q*d + r: the q parts leave the division exactly.
            let quot: Vec<(Ref, i64)> = ts
                .iter()
                .filter(|t| t.1 >= d)
                .map(|&(r, c)| (r, c / d))
                .collect();
            let rest: Vec<(Ref, i64)> = ts
                .iter()
                .filter(|t| t.1 % d != 0)
                .map(|&(r, c)| (r, c % d))
                .collect();
            if quot.is_empty() && k < d {
                return None;
            }
            let (qk, rk) = (k / d, k % d);
            let q = build_sum(g, &quot, qk);
            let r = build_sum(g, &rest, rk);
            let rb = g.bounds[r as usize];
            if rb.0 >= 0.0 && rb.1 < d as f64 {
                return Some(q);
            }
            let rd = g.binary(BinaryOp::Div, r, b);
            Some(g.add(q, rd))
        }
        BinaryOp::Mod if int && g.const_value(b).is_some_and(|c| c > 0.0) && ba.0 >= 0.0 => {
            let d = g.const_value(b)? as i64;
            if ba.1 < d as f64 {
                return Some(a);
            }
            if d == 1 {
                return Some(g.int(0));
            }
            let (mut ts, mut k) = (vec![], 0i64);
            terms(g, a, 1, &mut ts, &mut k);
            if k < 0
                || ts
                    .iter()
                    .any(|&(r, c)| c < 0 || g.bounds[r as usize].0 < 0.0)
            {
                return None;
            }
            let kept: Vec<(Ref, i64)> = ts
                .iter()
                .filter(|t| t.1 % d != 0)
                .map(|&(r, c)| (r, c % d))
                .collect();
            // As for a division: with S a multiple of f (which divides d) and r = k % f,
            // (S + k) % d = f * ((S / f + k / f) % (d / f)) + r, for k already below d.
            let km = k % d;
            let f = kept.iter().fold(d, |f, t| gcd(f, t.1));
            if f > 1 && !kept.is_empty() {
                let scaled: Vec<(Ref, i64)> = kept.iter().map(|&(r, c)| (r, c / f)).collect();
                let s = build_sum(g, &scaled, km / f);
                let dd = g.int(d / f);
                let m = g.modulo(s, dd);
                let fk = g.int(f);
                let hi = g.mul(m, fk);
                let lo = g.int(km % f);
                return Some(g.add(hi, lo));
            }
            if let Some((f, hi, lo)) = split_by_factor(g, &kept, km, d) {
                let (dd, fk) = (g.int(d / f), g.int(f));
                let m = g.modulo(hi, dd);
                let m = g.mul(m, fk);
                return Some(g.add(m, lo));
            }
            let changed =
                kept.len() != ts.len() || kept.iter().zip(&ts).any(|(a, b)| a.1 != b.1) || k >= d;
            if !changed {
                // (x % (a*d)) % d -> x % d
                let an = g.node(a).clone();
                if an.op == KOp::Binary(BinaryOp::Mod) {
                    if let Some(c1) = g.const_value(an.src[1]) {
                        if c1 as i64 % d == 0 {
                            return Some(g.binary(BinaryOp::Mod, an.src[0], b));
                        }
                    }
                }
                return None;
            }
            let r = build_sum(g, &kept, k % d);
            Some(g.binary(BinaryOp::Mod, r, b))
        }
        BinaryOp::CmpLt if int || !dtype.is_float() => {
            if ba.1 < bb.0 {
                Some(g.bool_const(true))
            } else if ba.0 >= bb.1 {
                Some(g.bool_const(false))
            } else if int {
                compare_by_factor(g, a, b)
            } else {
                None
            }
        }
        BinaryOp::And if dtype == DType::Bool => {
            if is_const(g, b, 1.0) || a == b {
                Some(a)
            } else if is_const(g, b, 0.0) {
                Some(b)
            } else {
                None
            }
        }
        BinaryOp::Or if dtype == DType::Bool => {
            if is_const(g, b, 0.0) || a == b {
                Some(a)
            } else if is_const(g, b, 1.0) {
                Some(b)
            } else {
                None
            }
        }
        BinaryOp::Max if int => {
            if ba.0 >= bb.1 {
                Some(a)
            } else if bb.0 >= ba.1 {
                Some(b)
            } else {
                None
            }
        }
        _ => None,
    }
}

/// `x < K` or `K < x` (K a constant) with `x = f*S + R`, `R` the terms `f` does not divide
/// and the constant's remainder, whose bounds stay in `[0, f)`, decided by `S` alone where `R`
/// cannot change the answer (the constant's quotient moves to the bound):
/// with `K = f*q + m`, `x < K` is `S < q` when `R >= m` always and `S < q + 1` when `R < m`
/// always; `K < x` is `q - 1 < S` when `R > m` always and `q < S` when `R <= m` always. An
/// upcast lane's index `64*i + lane` against a pad's edge at 128 is `i < 2` for every lane:
/// one condition for a whole row of lanes, which a vector can test once.
fn compare_by_factor(g: &mut KGraph, a: Ref, b: Ref) -> Option<Ref> {
    let (x, bound, x_left) = match (g.const_value(a), g.const_value(b)) {
        (None, Some(c)) => (a, c as i64, true),
        (Some(c), None) => (b, c as i64, false),
        _ => return None,
    };
    let (mut ts, mut k) = (vec![], 0i64);
    terms(g, x, 1, &mut ts, &mut k);
    let mut factors: Vec<i64> = ts.iter().map(|t| t.1).filter(|&c| c > 1).collect();
    factors.sort_unstable_by(|p, q| q.cmp(p));
    factors.dedup();
    for f in factors {
        let mut hi = vec![];
        let (mut rlo, mut rhi) = (k.rem_euclid(f) as f64, k.rem_euclid(f) as f64);
        let mut fits = true;
        for &(r, c) in &ts {
            if c % f == 0 {
                hi.push((r, c / f));
            } else {
                let rb = g.bounds[r as usize];
                fits &= c > 0 && rb.0 >= 0.0;
                rlo += c as f64 * rb.0;
                rhi += c as f64 * rb.1;
            }
        }
        if !fits || hi.is_empty() || rhi >= f as f64 {
            continue;
        }
        // S's constant moves to the bound, so that every lane compares the same node.
        let (q, m) = (
            bound.div_euclid(f) - k.div_euclid(f),
            bound.rem_euclid(f) as f64,
        );
        let s = build_sum(g, &hi, 0);
        let cmp = |g: &mut KGraph, l: Ref, r: Ref| g.binary(BinaryOp::CmpLt, l, r);
        if x_left {
            if rlo >= m {
                let q = g.int(q);
                return Some(cmp(g, s, q));
            } else if rhi < m {
                let q = g.int(q + 1);
                return Some(cmp(g, s, q));
            }
        } else if rlo > m {
            let q = g.int(q - 1);
            return Some(cmp(g, q, s));
        } else if rhi <= m {
            let q = g.int(q);
            return Some(cmp(g, q, s));
        }
    }
    None
}

/// Undo an unravel: `x%a * k + (x/a) * a*k` is `x * k` (also where x is itself `y/c` and
/// `x/a` was folded to `y/(c*a)`), and `x%a * k + (x/a % b) * a*k` is `x % (a*b) * k`
/// (x >= 0). Returns whether anything changed.
fn recombine(g: &mut KGraph, ts: &mut Vec<(Ref, i64)>) -> bool {
    let mut changed = false;
    'again: loop {
        for i in 0..ts.len() {
            let (m, k) = ts[i];
            let mn = g.node(m).clone();
            if mn.op != KOp::Binary(BinaryOp::Mod) || k == 0 {
                continue;
            }
            let (x, Some(a)) = (mn.src[0], g.const_value(mn.src[1])) else {
                continue;
            };
            if g.bounds[x as usize].0 < 0.0 || a <= 0.0 {
                continue;
            }
            for j in 0..ts.len() {
                let (t, kt) = ts[j];
                if j == i || kt != k * a as i64 {
                    continue;
                }
                let tn = g.node(t).clone();
                let replacement = match tn.op {
                    // (x/a) * a*k
                    KOp::Binary(BinaryOp::Div)
                        if tn.src[0] == x && g.const_value(tn.src[1]) == Some(a) =>
                    {
                        Some(x)
                    }
                    // (y / (c*a)) * a*k with x = y/c: that is (x/a) * a*k (the rule
                    // (y/c)/a -> y/(c*a) ran first), so with x%a it is x*k
                    KOp::Binary(BinaryOp::Div)
                        if matches!(g.node(x).op, KOp::Binary(BinaryOp::Div))
                            && g.node(x).src[0] == tn.src[0]
                            && g.const_value(g.node(x).src[1])
                                .zip(g.const_value(tn.src[1]))
                                .is_some_and(|(c, ca)| c > 0.0 && c * a == ca) =>
                    {
                        Some(x)
                    }
                    // (x%c / a) * a*k with a | c: together with x%a that is x%c
                    KOp::Binary(BinaryOp::Div) if g.const_value(tn.src[1]) == Some(a) => {
                        let inner = g.node(tn.src[0]).clone();
                        let c = inner.src.get(1).and_then(|&r| g.const_value(r));
                        match (inner.op, c) {
                            (KOp::Binary(BinaryOp::Mod), Some(c))
                                if inner.src[0] == x && c > 0.0 && (c as i64) % (a as i64) == 0 =>
                            {
                                Some(tn.src[0])
                            }
                            _ => None,
                        }
                    }
                    // (x/a % b) * a*k
                    KOp::Binary(BinaryOp::Mod) => {
                        let inner = g.node(tn.src[0]).clone();
                        match (inner.op, g.const_value(tn.src[1])) {
                            (KOp::Binary(BinaryOp::Div), Some(b))
                                if inner.src[0] == x && g.const_value(inner.src[1]) == Some(a) =>
                            {
                                let ab = g.int((a * b) as i64);
                                Some(g.binary(BinaryOp::Mod, x, ab))
                            }
                            _ => None,
                        }
                    }
                    _ => None,
                };
                if let Some(r) = replacement {
                    ts[i] = (r, k);
                    ts.remove(j);
                    changed = true;
                    continue 'again;
                }
            }
        }
        return changed;
    }
}

/// `idx` simplified where `valid` holds, for an access that `valid` guards. Each clause
/// `x < c` or `c < x + k` of `valid` (x an index expression that can reach beyond it) bounds
/// x to `[lo, hi)`: x is replaced by a stand-in range of size `hi - lo` plus `lo`, the rules
/// run on the rebuilt index with that bound, and x goes back in. Kept only where it leaves
/// fewer divisions and modulos. (col2im's `(y*11 + x) / 121` with `x = (13r + i) % 14 < 11`
/// is 0; the second part of a concatenation, `c` in `[128, 256)`, reads its source at
/// `128*row + c - 128`, whose divisions by the source's shape fold once `c - 128` is known
/// to be in `[0, 128)`.)
pub fn simplify_given(g: &mut KGraph, idx: Ref, valid: Ref) -> Ref {
    let mut bounded = vec![];
    clauses(g, valid, &mut bounded);
    bounded.retain(|&(x, lo, hi)| {
        let b = g.bounds[x as usize];
        hi > lo && (lo as f64 > b.0 || (hi as f64) <= b.1)
    });
    bounded.truncate((64 - GIVEN_IDS) as usize);
    if bounded.is_empty() || has_reduce(g, idx) {
        return idx;
    }
    let mut map = FastMap::default();
    let mut temps = vec![];
    for (i, &(x, lo, hi)) in bounded.iter().enumerate() {
        let t = g.intern(Node {
            op: KOp::Range {
                id: GIVEN_IDS + i as u32,
                size: (hi - lo) as u32,
            },
            dtype: INDEX,
            src: Srcs::new(),
        });
        let (stand_in, back) = if lo == 0 {
            (t, x)
        } else {
            let (l, minus_l) = (g.int(lo), g.int(-lo));
            (g.add(t, l), g.add(x, minus_l))
        };
        map.insert(x, stand_in);
        temps.push((t, back));
    }
    let mut out = g.replace(idx, &map);
    for (t, x) in temps {
        out = g.substitute(out, t, x);
    }
    if index_cost(g, out) < index_cost(g, idx) {
        out
    } else {
        idx
    }
}

/// The bounds `[lo, hi)` that the clauses `x < c` and `c < x + k` of a conjunction give
/// non-negative integer index expressions x (starting from what x can reach).
fn clauses(g: &KGraph, v: Ref, out: &mut Vec<(Ref, i64, i64)>) {
    let n = g.node(v);
    match n.op {
        KOp::Binary(BinaryOp::And) if n.dtype == DType::Bool => {
            let (a, b) = (n.src[0], n.src[1]);
            clauses(g, a, out);
            clauses(g, b, out);
        }
        KOp::Binary(BinaryOp::CmpLt) => {
            let (a, b) = (n.src[0], n.src[1]);
            // `x < c`, or `c < x + k` (x > c - k).
            let (x, lo, hi) = match (g.const_value(a), g.const_value(b)) {
                (None, Some(c)) => (a, None, Some(c as i64)),
                (Some(c), None) => {
                    let (mut x, mut k) = (b, 0i64);
                    while let KOp::Binary(BinaryOp::Add) = g.node(x).op {
                        let s = &g.node(x).src;
                        match g.const_value(s[1]) {
                            Some(kk) => {
                                k += kk as i64;
                                x = s[0];
                            }
                            None => break,
                        }
                    }
                    (x, Some(c as i64 - k + 1), None)
                }
                _ => return,
            };
            let xn = g.node(x);
            let xb = g.bounds[x as usize];
            let opaque = matches!(xn.op, KOp::Range { .. } | KOp::Const(_));
            if xn.dtype != INDEX || opaque || xb.0 < 0.0 || !xb.1.is_finite() || xb.1 > 1e9 {
                return;
            }
            let at = match out.iter().position(|o| o.0 == x) {
                Some(i) => i,
                None => {
                    out.push((x, xb.0 as i64, xb.1 as i64 + 1));
                    out.len() - 1
                }
            };
            if let Some(lo) = lo {
                out[at].1 = out[at].1.max(lo);
            }
            if let Some(hi) = hi {
                out[at].2 = out[at].2.min(hi);
            }
        }
        _ => {}
    }
}

fn has_reduce(g: &KGraph, r: Ref) -> bool {
    g.reachable(&[r])
        .iter()
        .any(|&n| matches!(g.node(n).op, KOp::Reduce(_)))
}

/// (divisions and modulos, nodes) of the expression `r`, each shared node once.
fn index_cost(g: &KGraph, r: Ref) -> (usize, usize) {
    let nodes = g.reachable(&[r]);
    let divs = nodes
        .iter()
        .filter(|&&n| matches!(g.node(n).op, KOp::Binary(BinaryOp::Div | BinaryOp::Mod)))
        .count();
    (divs, nodes.len())
}

/// For `Σ c*r + k` (non-negative terms) and a divisor `d`: a factor `f` of `d` such that the
/// terms whose coefficient `f` does not divide, with `k % f`, stay in `[0, f)`. Then, with
/// `S` the rest divided by `f` and `R` those terms, `(f*S + R) / d = S / (d/f)` and
/// `(f*S + R) % d = f * (S % (d/f)) + R`. Returns `(f, S, R)`. (An index `42*y + x` with
/// `x < 42`, divided by 588, is `y / 14`: the row of a (14, 42) reshape.)
fn split_by_factor(g: &mut KGraph, ts: &[(Ref, i64)], k: i64, d: i64) -> Option<(i64, Ref, Ref)> {
    let mut factors: Vec<i64> = ts.iter().map(|t| gcd(d, t.1)).filter(|&f| f > 1).collect();
    factors.sort_unstable_by(|a, b| b.cmp(a));
    factors.dedup();
    for f in factors {
        let (mut hi, mut lo) = (vec![], vec![]);
        let mut rmax = (k % f) as f64;
        for &(r, c) in ts {
            if c % f == 0 {
                hi.push((r, c / f));
            } else {
                rmax += c as f64 * g.bounds[r as usize].1;
                lo.push((r, c));
            }
        }
        if hi.is_empty() || lo.is_empty() || rmax >= f as f64 {
            continue;
        }
        let s = build_sum(g, &hi, k / f);
        let r = build_sum(g, &lo, k % f);
        return Some((f, s, r));
    }
    None
}

fn count_leaves(g: &KGraph, r: Ref) -> usize {
    let n = g.node(r);
    match n.op {
        KOp::Binary(BinaryOp::Add) => count_leaves(g, n.src[0]) + count_leaves(g, n.src[1]),
        KOp::Binary(BinaryOp::Mul) if g.const_value(n.src[1]).is_some() => {
            count_leaves(g, n.src[0])
        }
        _ => 1,
    }
}

/// Build `Σ r*c + k` without re-entering the Add rule's term merging.
fn build_sum(g: &mut KGraph, ts: &[(Ref, i64)], k: i64) -> Ref {
    let mut acc: Option<Ref> = None;
    for &(r, c) in ts {
        if c == 0 {
            continue;
        }
        let t = if c == 1 {
            r
        } else {
            let cc = g.int(c);
            g.intern(Node {
                op: KOp::Binary(BinaryOp::Mul),
                dtype: crate::shape::INDEX,
                src: Srcs::from_slice(&[r, cc]),
            })
        };
        acc = Some(match acc {
            None => t,
            Some(a) => g.intern(Node {
                op: KOp::Binary(BinaryOp::Add),
                dtype: crate::shape::INDEX,
                src: Srcs::from_slice(&[a, t]),
            }),
        });
    }
    let kc = g.int(k);
    match acc {
        None => kc,
        Some(a) if k == 0 => a,
        Some(a) => g.intern(Node {
            op: KOp::Binary(BinaryOp::Add),
            dtype: crate::shape::INDEX,
            src: Srcs::from_slice(&[a, kc]),
        }),
    }
}

/// `Σ_r where(r == e && c(r), v(r), 0)` over a range r, with e independent of r, is
/// `where(0 <= e < size, where(c(e), v(e), 0), 0)`: one-hot indexing (`x[idx]`, gather,
/// several tensor indices at once, scatter's last write) becomes a direct load. The conditions
/// may be and-ed or nested (`where(c1, where(c2, v, 0), 0)`); the bounds check goes outside
/// them all, so that every load the substitution moves to `e` is gated by it.
fn reduce(g: &mut KGraph, op: ReduceOp, dtype: DType, src: &[Ref]) -> Option<Ref> {
    if src.len() == 1 {
        return Some(src[0]);
    }
    // A reduce whose value does not depend on one of its ranges.
    let value = src[0];
    if op == ReduceOp::Max {
        let kept: Vec<Ref> = src[1..]
            .iter()
            .copied()
            .filter(|&r| g.depends_on(value, r))
            .collect();
        if kept.len() < src.len() - 1 {
            return Some(g.reduce(op, value, &kept));
        }
        return None;
    }
    if op != ReduceOp::Sum {
        return None;
    }
    // The nested `where(c, .., 0)` levels, each with its and-ed terms, and the value inside.
    let mut levels: Vec<Vec<Ref>> = vec![];
    let mut inner = value;
    loop {
        let w = g.node(inner).clone();
        if w.op != KOp::Where || g.const_value(w.src[2]) != Some(0.0) {
            break;
        }
        let mut terms = vec![];
        let mut stack = vec![w.src[0]];
        while let Some(t) = stack.pop() {
            let n = g.node(t);
            if n.op == KOp::Binary(BinaryOp::And) && n.dtype == DType::Bool {
                stack.extend(n.src.iter().copied());
            } else {
                terms.push(t);
            }
        }
        levels.push(terms);
        inner = w.src[1];
    }
    for (i, &r) in src[1..].iter().enumerate() {
        let size = match g.node(r).op {
            KOp::Range { size, .. } => size as i64,
            _ => continue,
        };
        let found = levels.iter().enumerate().find_map(|(lv, terms)| {
            terms.iter().enumerate().find_map(|(k, &t)| {
                let cond = g.node(t);
                if cond.op != KOp::Binary(BinaryOp::CmpEq) {
                    return None;
                }
                let e = if cond.src[0] == r && !g.depends_on(cond.src[1], r) {
                    cond.src[1]
                } else if cond.src[1] == r && !g.depends_on(cond.src[0], r) {
                    cond.src[0]
                } else {
                    return None;
                };
                is_index(g.node(e).dtype).then_some((lv, k, e))
            })
        });
        let Some((lv, k, e)) = found else { continue };
        let z = g.konst(0.0, dtype);
        let zero = g.int(0);
        let lo = g.le(zero, e);
        let n = g.int(size);
        let hi = g.lt(e, n);
        let inb = g.and(lo, hi);
        // Every load that reads at r now reads at e: gated by the bounds check, it never reads
        // outside its buffer (an index out of range, or scatter's "nothing written" -1).
        let mut memo = HashMap::new();
        let mut gated = |g: &mut KGraph, t: Ref| {
            let t = gate_loads(g, t, r, inb, &mut memo);
            g.substitute(t, r, e)
        };
        // Rebuild from the inside out, without the term that picked r.
        let mut v = gated(g, inner);
        for (l, terms) in levels.iter().enumerate().rev() {
            let mut cond: Option<Ref> = None;
            for (m, &t) in terms.iter().enumerate() {
                if (l, m) == (lv, k) {
                    continue;
                }
                let t = gated(g, t);
                cond = Some(match cond {
                    Some(c) => g.and(c, t),
                    None => t,
                });
            }
            if let Some(c) = cond {
                v = g.where_(c, v, z);
            }
        }
        let picked = g.where_(inb, v, z);
        let mut rest: Vec<Ref> = src[1..].to_vec();
        rest.remove(i);
        return Some(g.reduce(op, picked, &rest));
    }
    None
}

/// `x` with every load that depends on the range `r` gated by `cond` too.
fn gate_loads(g: &mut KGraph, x: Ref, r: Ref, cond: Ref, memo: &mut HashMap<Ref, Ref>) -> Ref {
    if !g.depends_on(x, r) {
        return x;
    }
    if let Some(&m) = memo.get(&x) {
        return m;
    }
    let n = g.node(x).clone();
    let src: Srcs = n
        .src
        .iter()
        .map(|&s| gate_loads(g, s, r, cond, memo))
        .collect();
    let out = match n.op {
        KOp::Load(_) => {
            let gate = g.and(src[1], cond);
            g.make(n.op, n.dtype, &[src[0], gate])
        }
        _ if src == n.src => x,
        _ => g.make(n.op, n.dtype, &src),
    };
    memo.insert(x, out);
    out
}

fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 {
        a.abs()
    } else {
        gcd(b, a % b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::KGraph;
    use std::collections::HashMap;

    #[test]
    fn constants_fold_and_identities_vanish() {
        let mut g = KGraph::new();
        let (a, b) = (g.int(6), g.int(7));
        let p = g.mul(a, b);
        assert_eq!(g.const_value(p), Some(42.0));
        let x = g.gidx(100);
        let zero = g.int(0);
        let one = g.int(1);
        let s = g.add(x, zero);
        assert_eq!(s, x);
        let m = g.mul(x, one);
        assert_eq!(m, x);
    }

    #[test]
    fn index_division_and_modulo_use_bounds() {
        let mut g = KGraph::new();
        let x = g.gidx(10);
        let r = g.range(4);
        // (x*4 + r) / 4 == x and (x*4 + r) % 4 == r, since 0 <= r < 4.
        let four = g.int(4);
        let xs = g.mul(x, four);
        let lin = g.add(xs, r);
        assert_eq!(g.div(lin, four), x);
        assert_eq!(g.modulo(lin, four), r);
        // (o + k*29) % 28 with o < 26, k < 3 is o + k: the coefficient reduces modulo 28.
        let o = g.range(26);
        let k = g.range(3);
        let c29 = g.int(29);
        let k29 = g.mul(k, c29);
        let e = g.add(o, k29);
        let c28 = g.int(28);
        let m = g.modulo(e, c28);
        let want = g.add(o, k);
        assert_eq!(m, want);
        // A comparison decided by bounds folds to a constant.
        let ten = g.int(10);
        let lt = g.lt(x, ten);
        assert_eq!(g.const_value(lt), Some(1.0));
    }

    /// The value of an integer index expression with the global index `x` and the reduce
    /// variable `r` set.
    fn eval(g: &KGraph, n: Ref, x: i64, r: i64) -> i64 {
        let node = g.node(n).clone();
        match node.op {
            KOp::Gidx => x,
            KOp::Range { .. } => r,
            KOp::Const(bits) => f64::from_bits(bits) as i64,
            KOp::Binary(op) => {
                let (a, b) = (eval(g, node.src[0], x, r), eval(g, node.src[1], x, r));
                match op {
                    BinaryOp::Add => a + b,
                    BinaryOp::Mul => a * b,
                    BinaryOp::Div => a / b,
                    BinaryOp::Mod => a % b,
                    _ => unreachable!("{op:?}"),
                }
            }
            op => unreachable!("{op:?}"),
        }
    }

    /// `x` against a constant, evaluated: the comparison a rewritten node stands for.
    fn eval_lt(g: &KGraph, n: Ref, x: i64, r: i64) -> bool {
        let node = g.node(n).clone();
        match node.op {
            KOp::Const(bits) => f64::from_bits(bits) != 0.0,
            KOp::Binary(BinaryOp::CmpLt) => eval(g, node.src[0], x, r) < eval(g, node.src[1], x, r),
            op => unreachable!("{op:?}"),
        }
    }

    #[test]
    fn a_comparison_drops_the_terms_that_cannot_change_it() {
        // A row of 64 lanes at 64*x against a pad's edges at 128: one condition for all.
        let mut g = KGraph::new();
        let x = g.gidx(6);
        let (c64, c128, c2, c1) = (g.int(64), g.int(128), g.int(2), g.int(1));
        let x64 = g.mul(x, c64);
        let below = g.lt(x, c2);
        let above = g.lt(c1, x);
        for lane in 0..64 {
            let l = g.int(lane);
            let e = g.add(x64, l);
            assert_eq!(g.lt(e, c128), below, "lane {lane}");
            let l1 = g.int(lane + 1);
            let e1 = g.add(x64, l1);
            assert_eq!(g.lt(c128, e1), above, "lane {lane}");
        }
        // With a loop variable among the dropped terms, and a bound the rest can straddle (kept):
        // every case still compares as the original does.
        let r = g.range(4);
        let c8 = g.int(8);
        let x8 = g.mul(x, c8);
        let e = g.add(x8, r);
        let two = g.int(2);
        let e = g.add(e, two);
        for k in [0i64, 3, 8, 15, 16, 17, 20, 26, 40, 47] {
            let kk = g.int(k);
            let (lt, gt) = (g.lt(e, kk), g.lt(kk, e));
            for xv in 0..6 {
                for rv in 0..4 {
                    let v = 8 * xv + rv + 2;
                    assert_eq!(eval_lt(&g, lt, xv, rv), v < k, "{v} < {k}");
                    assert_eq!(eval_lt(&g, gt, xv, rv), k < v, "{k} < {v}");
                }
            }
        }
        let c16 = g.int(16);
        assert_eq!(g.lt(e, c16), below, "8x + r + 2 < 16 is x < 2");
    }

    #[test]
    fn a_factor_shared_with_the_divisor_divides_out() {
        // An upcast lane of 3 through a reshape: (x*3 + lane) / 288 is x / 96 for every lane,
        // so the three lanes load one element; (x*3 + lane) % 288 is (x % 96) * 3 + lane.
        let mut g = KGraph::new();
        let x = g.gidx(6144);
        let (c3, c96, c288) = (g.int(3), g.int(96), g.int(288));
        let x3 = g.mul(x, c3);
        for lane in 0..3 {
            let l = g.int(lane);
            let e = g.add(x3, l);
            assert_eq!(g.div(e, c288), g.div(x, c96), "lane {lane}");
            let m = g.modulo(x, c96);
            let m3 = g.mul(m, c3);
            assert_eq!(g.modulo(e, c288), g.add(m3, l), "lane {lane}");
        }
        // Against brute force, with a reduce variable in the sum and constants past the factor.
        let r = g.range(5);
        for (cx, cr, k, d) in [(6, 4, 7, 8), (10, 15, 3, 20), (4, 8, 13, 12), (9, 6, 2, 27)] {
            let (a, b, kk, dd) = (g.int(cx), g.int(cr), g.int(k), g.int(d));
            let (xa, rb) = (g.mul(x, a), g.mul(r, b));
            let s = g.add(xa, rb);
            let e = g.add(s, kk);
            let (q, m) = (g.div(e, dd), g.modulo(e, dd));
            for xv in [0, 1, 5, 17, 100, 6143] {
                for rv in 0..5 {
                    let v = cx * xv + cr * rv + k;
                    assert_eq!(eval(&g, q, xv, rv), v / d, "({cx}x+{cr}r+{k})/{d}");
                    assert_eq!(eval(&g, m, xv, rv), v % d, "({cx}x+{cr}r+{k})%{d}");
                }
            }
        }
    }

    /// The value of an integer index expression with its leaves (global index, ranges) set.
    fn value(g: &KGraph, n: Ref, env: &HashMap<Ref, i64>) -> i64 {
        let node = g.node(n).clone();
        match node.op {
            KOp::Const(bits) => f64::from_bits(bits) as i64,
            KOp::Binary(op) => {
                let (a, b) = (value(g, node.src[0], env), value(g, node.src[1], env));
                match op {
                    BinaryOp::Add => a + b,
                    BinaryOp::Mul => a * b,
                    BinaryOp::Div => a / b,
                    BinaryOp::Mod => a % b,
                    BinaryOp::CmpLt => (a < b) as i64,
                    BinaryOp::And => a & b,
                    _ => unreachable!("{op:?}"),
                }
            }
            _ => env[&n],
        }
    }

    /// Every assignment of the leaves `vars` (each `(ref, size)`).
    fn assignments(vars: &[(Ref, i64)]) -> Vec<HashMap<Ref, i64>> {
        let mut out = vec![HashMap::new()];
        for &(v, n) in vars {
            out = out
                .into_iter()
                .flat_map(|e| {
                    (0..n).map(move |x| {
                        let mut e = e.clone();
                        e.insert(v, x);
                        e
                    })
                })
                .collect();
        }
        out
    }

    #[test]
    fn a_factor_of_some_terms_splits_the_division() {
        // col2im's index: 42*(13a + y) + 13b + x, with 13b + x < 42, divided by 588 = 42*14 is
        // (13a + y) / 14, the row of a (14, 42) reshape; its remainder keeps 13b + x.
        let mut g = KGraph::new();
        let (a, b) = (g.range(3), g.range(3));
        let (y, x) = (g.range(13), g.range(13));
        let (c546, c42, c13) = (g.int(546), g.int(42), g.int(13));
        let t = [g.mul(a, c546), g.mul(y, c42), g.mul(b, c13)];
        let s = g.add(t[0], t[1]);
        let s = g.add(s, t[2]);
        let e = g.add(s, x);
        let c588 = g.int(588);
        let q = g.div(e, c588);
        let a13 = g.mul(a, c13);
        let row = g.add(a13, y);
        let c14 = g.int(14);
        assert_eq!(q, g.div(row, c14));
        // Against brute force, for divisors the factor splits and divisors it does not.
        let vars = [(a, 3), (b, 3), (y, 13), (x, 13)];
        for d in [588, 84, 1176, 210, 42, 26, 1000] {
            let dd = g.int(d);
            let (q, m) = (g.div(e, dd), g.modulo(e, dd));
            let k = g.int(5);
            let e5 = g.add(e, k);
            let (q5, m5) = (g.div(e5, dd), g.modulo(e5, dd));
            for env in assignments(&vars) {
                let v = value(&g, e, &env);
                assert_eq!(value(&g, q, &env), v / d, "/{d} at {env:?}");
                assert_eq!(value(&g, m, &env), v % d, "%{d} at {env:?}");
                assert_eq!(value(&g, q5, &env), (v + 5) / d, "(+5)/{d}");
                assert_eq!(value(&g, m5, &env), (v + 5) % d, "(+5)%{d}");
            }
        }
    }

    #[test]
    fn a_guard_bounds_the_index_it_guards() {
        // col2im's load: the window's position (13r + i) % 14 is valid below 11, so the
        // flattened (11, 11) index, divided by 121 to find the channel, adds nothing.
        let mut g = KGraph::new();
        let (r, s) = (g.range(3), g.range(3));
        let (i, j) = (g.range(13), g.range(13));
        let ch = g.range(32);
        let (c13, c14, c11, c121) = (g.int(13), g.int(14), g.int(11), g.int(121));
        let pos = |g: &mut KGraph, r: Ref, i: Ref| {
            let r13 = g.mul(r, c13);
            let p = g.add(r13, i);
            g.modulo(p, c14)
        };
        let (py, px) = (pos(&mut g, r, i), pos(&mut g, s, j));
        let (vy, vx) = (g.lt(py, c11), g.lt(px, c11));
        let valid = g.and(vy, vx);
        let flat = g.mul(py, c11);
        let flat = g.add(flat, px);
        let chw = g.mul(ch, c121);
        let e = g.add(chw, flat);
        // (ch*121 + flat) / 121 % 32 and % 121: the channel and the position.
        let q = g.div(e, c121);
        let c32 = g.int(32);
        let q = g.modulo(q, c32);
        let m = g.modulo(e, c121);
        let c3872 = g.int(3872);
        let idx = g.mul(q, c3872);
        let idx = g.add(idx, m);
        let simple = simplify_given(&mut g, idx, valid);
        assert_ne!(simple, idx);
        assert!(index_cost(&g, simple).0 < index_cost(&g, idx).0);
        let mut checked = 0;
        for env in assignments(&[(r, 3), (s, 3), (i, 13), (j, 13), (ch, 32)]) {
            if value(&g, valid, &env) == 1 {
                assert_eq!(value(&g, simple, &env), value(&g, idx, &env), "at {env:?}");
                checked += 1;
            }
        }
        assert!(checked > 0);
        // Without a guard, or with one that bounds nothing, the index stays as it is.
        let t = g.bool_const(true);
        assert_eq!(simplify_given(&mut g, idx, t), idx);
        let c100 = g.int(100);
        let loose = g.lt(py, c100);
        assert_eq!(simplify_given(&mut g, idx, loose), idx);
    }

    #[test]
    fn a_guard_from_below_bounds_the_index_it_guards() {
        // The second part of a concatenation along an axis of 12 (parts of 4): column c of
        // row y, valid for 4 <= c < 8, reads its (3, 2, 2)-shaped source at 4y + c - 4,
        // unravelled by divisions that fold once c - 4 is known to be in [0, 4).
        let mut g = KGraph::new();
        let (y, x) = (g.range(3), g.range(24));
        let (c12, c1, c4, c8, m4) = (g.int(12), g.int(1), g.int(4), g.int(8), g.int(-4));
        let c = g.modulo(x, c12);
        let c1p = g.add(c, c1);
        let lo = g.lt(c4, c1p);
        let hi = g.lt(c, c8);
        let valid = g.and(lo, hi);
        let y4 = g.mul(y, c4);
        let flat = g.add(y4, c);
        let flat = g.add(flat, m4);
        let (c2, c100) = (g.int(2), g.int(100));
        let row = g.div(flat, c4);
        let col = g.modulo(flat, c4);
        let col_hi = g.div(col, c2);
        let col_lo = g.modulo(col, c2);
        let idx = g.mul(row, c100);
        let t = g.mul(col_hi, c2);
        let idx = g.add(idx, t);
        let idx = g.add(idx, col_lo);
        let simple = simplify_given(&mut g, idx, valid);
        assert!(index_cost(&g, simple).0 < index_cost(&g, idx).0, "{g}");
        let mut checked = 0;
        for env in assignments(&[(y, 3), (x, 24)]) {
            if value(&g, valid, &env) == 1 {
                assert_eq!(value(&g, simple, &env), value(&g, idx, &env), "at {env:?}");
                checked += 1;
            }
        }
        assert_eq!(checked, 3 * 8);
    }

    #[test]
    fn unravel_then_linearize_is_the_identity() {
        let mut g = KGraph::new();
        let x = g.gidx(120);
        let idx = crate::kernel::unravel(&mut g, x, &[2, 3, 4, 5]);
        let st = crate::shape::strides_for(&[2, 3, 4, 5]);
        let mut lin = g.int(0);
        for (i, &ix) in idx.iter().enumerate() {
            let c = g.int(st[i] as i64);
            let t = g.mul(ix, c);
            lin = g.add(lin, t);
        }
        assert_eq!(lin, x);
        // (x%9)/3*3 + x%3 == x%9
        let nine = g.int(9);
        let three = g.int(3);
        let m9 = g.modulo(x, nine);
        let d = g.div(m9, three);
        let d3 = g.mul(d, three);
        let m3 = g.modulo(x, three);
        assert_eq!(g.add(d3, m3), m9);
    }

    #[test]
    fn a_pooling_windows_position_recombines() {
        // A 2x2 window's position through a pooling view: (v/52)*52 + (v/26 % 2)*26 +
        // (v/2 % 13)*2 + v%2 == v (row pairs of 26, then column pairs), for v = x % 676.
        let mut g = KGraph::new();
        let x = g.gidx(676 * 128);
        let c676 = g.int(676);
        let v = g.modulo(x, c676);
        // (v / div % m) * scale, the `% m` left out where m is 0.
        let digit = |g: &mut KGraph, div: i64, m: i64, scale: i64| {
            let d = g.int(div);
            let mut t = g.div(v, d);
            if m > 0 {
                let mm = g.int(m);
                t = g.modulo(t, mm);
            }
            let sc = g.int(scale);
            g.mul(t, sc)
        };
        let mut sum = digit(&mut g, 52, 0, 52);
        for (div, m, scale) in [(26, 2, 26), (2, 13, 2), (1, 2, 1)] {
            let t = digit(&mut g, div, m, scale);
            sum = g.add(sum, t);
        }
        assert_eq!(sum, v);
    }

    #[test]
    fn one_hot_reduce_becomes_a_direct_load() {
        let mut g = KGraph::new();
        let idx = g.gidx(8);
        let yes = g.bool_const(true);
        let e = g.load(1, crate::shape::INDEX, idx, yes); // the index to pick
        let r = g.range(100);
        let cond = g.binary(BinaryOp::CmpEq, r, e);
        let v = g.load(2, DType::F32, r, yes);
        let z = g.konst(0.0, DType::F32);
        let w = g.where_(cond, v, z);
        let red = g.reduce(ReduceOp::Sum, w, &[r]);
        // No reduce is left: the value is a gated load at index e.
        assert!(!matches!(g.node(red).op, KOp::Reduce(_)));
        let n = g.node(red).clone();
        assert_eq!(n.op, KOp::Where);
        assert!(matches!(g.node(n.src[1]).op, KOp::Load(2)));
        assert_eq!(g.node(n.src[1]).src[0], e);
    }
}
