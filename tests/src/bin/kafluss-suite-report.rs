//! Gathers the client suite's results: one summary line per client and settings, the two
//! compatibility matrices (idempotence off; idempotent) checked against `docs/compatibility.md`
//! (rewritten instead with `KAFLUSS_UPDATE_DOCS=1`), and a closing `suite: N passed, M failed`
//! line. Exits 1 if any case failed, a client has no results, or a matrix of the document is out
//! of date.

use std::process::ExitCode;

use kafluss_tests::clients::{Client, Settings};
use kafluss_tests::report::{
    compatibility_doc, matrix_in_doc, matrix_markdown, replace_matrix, results_dir, ClientReport,
};

fn main() -> ExitCode {
    let mut problems = Vec::new();
    let mut matrices = Vec::new();
    let (mut passed, mut failed, mut missing) = (0, 0, 0);
    for settings in Settings::ALL {
        let mut reports = Vec::new();
        for client in Client::ALL {
            match ClientReport::read(client, settings) {
                Ok(Some(report)) => {
                    println!("{}", report.summary_line());
                    if report.failed() > 0 {
                        print!("{}", report.describe());
                    }
                    passed += report.passed();
                    failed += report.failed();
                    reports.push((client, Some(report)));
                }
                Ok(None) => {
                    problems.push(format!(
                        "no results for {} in {} (its test did not run)",
                        settings.slug(client),
                        results_dir().display()
                    ));
                    reports.push((client, None));
                }
                Err(error) => {
                    problems.push(error.to_string());
                    reports.push((client, None));
                }
            }
        }
        // A client with no results counts as one failed case, so the line never reads all-green.
        missing += reports.iter().filter(|(_, report)| report.is_none()).count();
        let matrix = matrix_markdown(&reports);
        println!("\n{settings:?}:\n{matrix}");
        matrices.push((settings, matrix));
    }

    let doc_path = compatibility_doc();
    match std::fs::read_to_string(&doc_path) {
        Ok(mut doc) => {
            let update = std::env::var_os("KAFLUSS_UPDATE_DOCS").is_some_and(|v| v == "1");
            let mut rewritten = false;
            for (settings, matrix) in &matrices {
                match (matrix_in_doc(&doc, *settings), update) {
                    (None, _) => problems.push(format!(
                        "{} has no {settings:?} matrix markers",
                        doc_path.display()
                    )),
                    (Some(current), false) if current != matrix.trim_matches('\n') => {
                        problems.push(format!(
                            "the {settings:?} matrix in {} differs from this run's; rerun with KAFLUSS_UPDATE_DOCS=1 to rewrite it",
                            doc_path.display()
                        ))
                    }
                    (Some(_), false) => {
                        println!("{} {settings:?} matrix is up to date", doc_path.display())
                    }
                    (Some(_), true) => {
                        if let Some(new) = replace_matrix(&doc, matrix, *settings) {
                            doc = new;
                            rewritten = true;
                        }
                    }
                }
            }
            if rewritten {
                match std::fs::write(&doc_path, &doc) {
                    Ok(()) => println!("rewrote the matrices in {}", doc_path.display()),
                    Err(error) => problems.push(format!("{}: {error}", doc_path.display())),
                }
            }
        }
        Err(error) => problems.push(format!("{}: {error}", doc_path.display())),
    }

    for problem in &problems {
        println!("problem: {problem}");
    }
    println!("suite: {passed} passed, {} failed", failed + missing);
    if failed == 0 && problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
