//! `completions` and `man`: what clap knows of the command line, for shells and man(1). Written
//! on stdout, so that packagers put them where their system wants them.

use std::io::Write;
use std::process::ExitCode;

use clap::CommandFactory;

use crate::cli::Cli;

pub fn completions(shell: clap_complete::Shell) -> ExitCode {
    clap_complete::generate(
        shell,
        &mut Cli::command(),
        "spawnscope",
        &mut std::io::stdout(),
    );
    ExitCode::SUCCESS
}

pub fn man() -> ExitCode {
    let mut page = Vec::new();
    match clap_mangen::Man::new(Cli::command())
        .render(&mut page)
        .and_then(|_| std::io::stdout().write_all(&page))
    {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("spawnscope: man: {err}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completions_know_every_subcommand_and_the_man_page_names_them() {
        let mut bash = Vec::new();
        clap_complete::generate(
            clap_complete::Shell::Bash,
            &mut Cli::command(),
            "spawnscope",
            &mut bash,
        );
        let bash = String::from_utf8(bash).unwrap();
        for sub in [
            "check",
            "run",
            "sysctl",
            "compare",
            "report",
            "flame",
            "completions",
        ] {
            assert!(bash.contains(sub), "{sub} in the bash completion");
        }
        assert!(bash.contains("--runtime"), "run's options too");
        let mut page = Vec::new();
        clap_mangen::Man::new(Cli::command())
            .render(&mut page)
            .unwrap();
        let page = String::from_utf8(page).unwrap();
        assert!(
            page.starts_with(".ie") || page.contains(".TH spawnscope"),
            "{page}"
        );
        assert!(page.contains("compare"), "{page}");
    }
}
