//! `[devices]` of a plan: what each request asks of the inventory.

use std::collections::BTreeMap;

use super::super::model::*;
use super::super::schema::Table;
use super::{Val, Walker};

impl Walker<'_> {
    pub(super) fn devices(&mut self, v: &Val<'_>) -> BTreeMap<String, DeviceRequest> {
        let mut out = BTreeMap::new();
        let Some(t) = self.table(v, "[devices]") else {
            return out;
        };
        for (k, v) in t.iter() {
            let what = format!("device request `{}`", k.get_ref());
            let Some(d) = self.table(v, &what) else {
                continue;
            };
            self.keys(d, Table::Device, &[], &format!("in {what}"));
            let kind = self
                .required(d, "kind", &what, k.span(), "kind = \"gpu\"")
                .and_then(|v| self.string(v, &format!("`kind` of {what}")));
            let ids = d
                .get("ids")
                .and_then(|v| self.load_strings(v, &format!("`ids` of {what}")))
                .unwrap_or_default();
            let count = match d.get("count") {
                Some(v) => self
                    .bounded(v, &format!("`count` of {what}"), 1, 4096)
                    .map(|n| n as u32),
                None => Some((ids.len() as u32).max(1)),
            };
            if let (Some(c), Some(v), false) = (count, d.get("count"), ids.is_empty()) {
                if c as usize != ids.len() {
                    self.err(
                        v.span(),
                        format!("{what} asks for {c} devices but names {} ids", ids.len()),
                        "make `count` equal the number of `ids`, or drop `count`",
                    );
                }
            }
            let cores = d
                .get("cores")
                .and_then(|v| self.bounded(v, &format!("`cores` of {what}"), 1, 4096))
                .map(|n| n as u32);
            let simulate = d
                .get("simulate")
                .and_then(|v| self.boolean(v, &format!("`simulate` of {what}")))
                .unwrap_or(false);
            let mig = d
                .get("mig")
                .and_then(|v| self.mig(v, kind.as_deref(), &what, cores.is_some()));
            if let (Some(kind), Some(count)) = (kind, count) {
                out.insert(
                    k.get_ref().to_string(),
                    DeviceRequest {
                        kind,
                        count,
                        cores,
                        ids: ids.into_iter().map(|i| i.0).collect(),
                        simulate,
                        mig,
                    },
                );
            }
        }
        out
    }

    /// `mig`: a profile such as `1g.18gb`, or `any`; only for GPUs, and not with
    /// `cores` (an instance is the unit).
    fn mig(&mut self, v: &Val<'_>, kind: Option<&str>, what: &str, cores: bool) -> Option<String> {
        let p = self.string(v, &format!("`mig` of {what}"))?;
        let plain = !p.is_empty()
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '+');
        if !plain {
            self.err(
                v.span(),
                format!("`mig` of {what} is `{p}`, not a MIG profile"),
                "name a profile such as \"1g.18gb\" or \"3g.71gb\", or \"any\"",
            );
            return None;
        }
        if kind.is_some_and(|k| !k.eq_ignore_ascii_case("gpu")) {
            self.err(
                v.span(),
                format!("`mig` of {what} asks a MIG instance of a non-GPU device"),
                "drop `mig`, or make `kind = \"gpu\"`",
            );
            return None;
        }
        if cores {
            self.err(
                v.span(),
                format!("{what} gives both `mig` and `cores`"),
                "a MIG instance is the unit leased: drop `cores`",
            );
            return None;
        }
        Some(p)
    }
}
