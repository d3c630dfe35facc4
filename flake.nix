# spawnscope with Nix: the same Go, Rust, bpftrace and perf on every machine, from one pinned
# nixpkgs (flake.lock), so a number measured here can be re-measured there.
#
#   nix run                       the main job, as `sudo ./scripts/trace.sh` with no arguments (root)
#   nix run .#spawnscope -- ARGS  the conductor, wired to the Nix-built workloads, bpftrace and perf
#   nix run .#goroutines -- hold --n 1000        a workload on its own (no root needed; also
#                                                .#threads, .#tokio-tasks, .#processes)
#   nix build && sudo ./result/bin/spawnscope-trace     the main job as root, from a build
#   nix develop                   every tool the project builds, tests and traces with
#
# Flakes are experimental: add --extra-experimental-features 'nix-command flakes' or put
# `experimental-features = nix-command flakes` in nix.conf.
# Tested offline against a stand-in for nixpkgs: ./scripts/test-nix.sh (CONTRIBUTING.md, "The Nix offline check").
{
  description = "spawnscope: what an OS thread, a goroutine and a tokio task cost, measured from outside";

  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-25.11";

  outputs =
    { self, nixpkgs }:
    let
      inherit (nixpkgs) lib;

      systems = [
        "x86_64-linux"
        "aarch64-linux"
      ];
      forAllSystems = f: lib.genAttrs systems (system: f system nixpkgs.legacyPackages.${system});

      # One version for every package: the Cargo workspace's.
      version = (builtins.fromTOML (builtins.readFile ./Cargo.toml)).workspace.package.version;

      # Sources copied by content, so a change to the docs or the scripts rebuilds nothing. Of
      # examples/, only rust-sleepers: a member of the Cargo workspace.
      root = toString ./.;
      notRust = [
        ".ci"
        ".git"
        "flake.lock"
        "flake.nix"
        "goroutines-go"
        "nix"
        "README.md"
        "results"
        "scripts"
        "target"
      ];
      rustSrc = lib.cleanSourceWith {
        name = "spawnscope-rust-source";
        src = ./.;
        filter =
          path: _type:
          if dirOf path == root then
            !(builtins.elem (baseNameOf path) notRust || lib.hasPrefix "result" (baseNameOf path))
          else
            dirOf path != root + "/examples" || baseNameOf path == "rust-sleepers";
      };
      goSrc = lib.cleanSourceWith {
        name = "goroutines-go-source";
        src = ./goroutines-go;
        # `go build` in place leaves the binary beside the sources.
        filter = path: _type: baseNameOf path != "goroutines";
      };

      meta = {
        license = lib.licenses.mit;
        platforms = lib.platforms.linux;
      };

      mkPackages =
        pkgs:
        let
          # Shared by the Rust packages. The binaries keep their symbols and line tables
          # (Cargo.toml's release profile), as perf and the flame graphs need them; the test
          # suites run in ./scripts/test.sh, not here (they spawn thousands of tasks and read
          # the host's limits, which a build sandbox does not have).
          rustPackage =
            args:
            pkgs.rustPlatform.buildRustPackage (
              {
                inherit version;
                src = rustSrc;
                cargoLock.lockFile = ./Cargo.lock;
                doCheck = false;
                dontStrip = true;
              }
              // args
            );
        in
        rec {
          # The workloads are installed under names no other program has (`threads` is a common
          # word); spawnscope looks for them on PATH under these names only.
          threads = rustPackage {
            pname = "threads";
            cargoBuildFlags = [
              "--package"
              "threads"
            ];
            postInstall = ''
              mv "$out/bin/threads" "$out/bin/spawnscope-threads"
            '';
            meta = meta // {
              description = "spawnscope workload: N OS threads (Rust std::thread), JSON Lines on stdout";
              mainProgram = "spawnscope-threads";
            };
          };

          # tokio, like every crate, comes from Cargo.lock (vendored by cargoLock, no hash to keep).
          tokio-tasks = rustPackage {
            pname = "tokio-tasks";
            cargoBuildFlags = [
              "--package"
              "tokio-tasks"
            ];
            postInstall = ''
              mv "$out/bin/tokio-tasks" "$out/bin/spawnscope-tokio-tasks"
            '';
            meta = meta // {
              description = "spawnscope workload: N tokio tasks (multi-thread runtime), JSON Lines on stdout";
              mainProgram = "spawnscope-tokio-tasks";
            };
          };

          # One forked process per task: std only, like threads.
          processes = rustPackage {
            pname = "processes";
            cargoBuildFlags = [
              "--package"
              "processes"
            ];
            postInstall = ''
              mv "$out/bin/processes" "$out/bin/spawnscope-processes"
            '';
            meta = meta // {
              description = "spawnscope workload: N forked processes (fork and pipes), JSON Lines on stdout";
              mainProgram = "spawnscope-processes";
            };
          };

          goroutines = pkgs.buildGoModule {
            pname = "goroutines";
            # Pure Go: `net` (serve) would otherwise link cgo and start its threads through glibc.
            CGO_ENABLED = 0;
            inherit version;
            src = goSrc;
            # Go standard library only: nothing to vendor.
            vendorHash = null;
            doCheck = false;
            dontStrip = true;
            postInstall = ''
              mv "$out/bin/goroutines" "$out/bin/spawnscope-goroutines"
            '';
            meta = meta // {
              description = "spawnscope workload: N goroutines (Go standard library), JSON Lines on stdout";
              mainProgram = "spawnscope-goroutines";
            };
          };

          # The conductor as cargo builds it. The collector crate compiles probes/*.bpf.c into
          # BPF CO-RE objects at build time (libbpf-cargo, vendored libbpf-sys): clang for the BPF
          # target, the libbpf headers, libelf and zlib to link libbpf, pkg-config to find them.
          spawnscope-unwrapped = rustPackage {
            pname = "spawnscope-unwrapped";
            cargoBuildFlags = [
              "--package"
              "spawnscope"
            ];
            nativeBuildInputs = [
              pkgs.clang
              pkgs.pkg-config
              pkgs.installShellFiles
            ];
            buildInputs = [
              pkgs.libbpf
              pkgs.elfutils
              pkgs.zlib
            ];
            # The clang wrapper's hardening flags are for the host, not the BPF target, which
            # rejects -fzero-call-used-regs (as nixpkgs' own sched-ext build does).
            hardeningDisable = [ "zerocallusedregs" ];
            # The source has no .git: the commit machine.json names comes from the flake.
            SPAWNSCOPE_GIT_COMMIT = self.shortRev or self.dirtyShortRev or "unknown";
            # Shell completions and the man page, from the binary just built (clap_complete,
            # clap_mangen): share/{bash-completion,zsh,fish} and share/man/man1.
            postInstall = ''
              installShellCompletion --cmd spawnscope \
                --bash <("$out/bin/spawnscope" completions bash) \
                --zsh <("$out/bin/spawnscope" completions zsh) \
                --fish <("$out/bin/spawnscope" completions fish)
              "$out/bin/spawnscope" man >spawnscope.1
              installManPage spawnscope.1
            '';
            meta = meta // {
              description = "spawnscope conductor, without the Nix-built workloads and tools on its path";
              mainProgram = "spawnscope";
            };
          };

          # The conductor as users run it: it finds the Nix-built workloads through
          # SPAWNSCOPE_THREADS_BIN / SPAWNSCOPE_GOROUTINES_BIN / SPAWNSCOPE_TOKIO_BIN /
          # SPAWNSCOPE_PROCESSES_BIN and bpftrace,
          # perf and inferno on PATH; `run` and `compare` say how to re-run with sudo when started
          # without root.
          spawnscope = pkgs.writeShellApplication {
            name = "spawnscope";
            runtimeInputs = [
              pkgs.bpftrace
              pkgs.perf
              pkgs.inferno
              pkgs.coreutils
            ];
            runtimeEnv = {
              SPAWNSCOPE_CONDUCTOR = lib.getExe spawnscope-unwrapped;
              SPAWNSCOPE_THREADS_BIN = lib.getExe threads;
              SPAWNSCOPE_GOROUTINES_BIN = lib.getExe goroutines;
              SPAWNSCOPE_TOKIO_BIN = lib.getExe tokio-tasks;
              SPAWNSCOPE_PROCESSES_BIN = lib.getExe processes;
            };
            text = builtins.readFile ./nix/spawnscope.sh;
            meta = meta // {
              description = "spawnscope conductor with the Nix-built workloads, bpftrace and perf";
            };
          };

          # The main job: what `sudo ./scripts/trace.sh` does with no arguments.
          spawnscope-trace = pkgs.writeShellApplication {
            name = "spawnscope-trace";
            runtimeInputs = [
              spawnscope
              pkgs.coreutils
            ];
            text = builtins.readFile ./nix/main-job.sh;
            meta = meta // {
              description = "spawnscope main job: 1M goroutines beside 100k threads, then the report";
            };
          };

          default = pkgs.symlinkJoin {
            name = "spawnscope-${version}";
            paths = [
              spawnscope-trace
              spawnscope
              threads
              goroutines
              tokio-tasks
              processes
            ];
            # The conductor's completions and man page (built with it; its bin/ is the wrapper's).
            postBuild = ''
              ln -s ${spawnscope-unwrapped}/share "$out/share"
            '';
            meta = meta // {
              description = "spawnscope: the main job, the conductor and the four workloads";
              mainProgram = "spawnscope-trace";
            };
          };
        };
    in
    {
      packages = forAllSystems (
        _system: pkgs:
        let
          p = mkPackages pkgs;
        in
        {
          inherit (p)
            default
            threads
            goroutines
            tokio-tasks
            processes
            spawnscope
            spawnscope-unwrapped
            ;
        }
      );

      # Every app runs a package's main program (the offline check holds them to that).
      apps = lib.genAttrs systems (
        system:
        let
          p = self.packages.${system};
          app = drv: {
            type = "app";
            program = lib.getExe drv;
          };
        in
        {
          default = app p.default;
          threads = app p.threads;
          goroutines = app p.goroutines;
          tokio-tasks = app p.tokio-tasks;
          processes = app p.processes;
          spawnscope = app p.spawnscope;
        }
      );

      devShells = forAllSystems (
        system: pkgs: {
          default = pkgs.mkShell {
            packages = [
              pkgs.go
              pkgs.cargo
              pkgs.rustc
              pkgs.clippy
              pkgs.rustfmt
              pkgs.clang
              pkgs.bpftrace
              # perf moved from linuxPackages.perf to the top level (nixpkgs 2025-08).
              pkgs.perf
              pkgs.inferno
              pkgs.shellcheck
              # Headless, for the HTML report's test.
              pkgs.chromium
            ];
            # pkg-config, libbpf, elfutils and zlib: what the collector crate links with.
            inputsFrom = [ self.packages.${system}.spawnscope-unwrapped ];
            hardeningDisable = [ "zerocallusedregs" ];
          };
        }
      );
    };
}
