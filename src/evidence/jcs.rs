// TEMPORARY stub until the evidence branch lands.
pub fn to_canonical<T: serde::Serialize>(t: &T) -> Result<Vec<u8>, serde_json::Error> {
    let v = serde_json::to_value(t)?;
    serde_json::to_vec(&v)
}
