//! Fuzz target: the scenario parser and validator (`pipefence_scenario::parse`) and the
//! diagnostics renderer on any bytes. Any input must give a scenario or diagnostics: a panic
//! or an abort (stack overflow) is a crash.

fn main() {
    afl::fuzz!(|data: &[u8]| {
        let text = String::from_utf8_lossy(data);
        if let Err(d) = pipefence_scenario::parse("fuzz.kdl", &text) {
            let _ = pipefence_scenario::render_diagnostics("fuzz.kdl", &text, &d);
        }
    });
}
