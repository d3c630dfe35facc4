# TEST DOUBLE — NOT NIXPKGS. legacyPackages.<system> of the stand-in: the builders and packages
# spawnscope's flake names, under nixpkgs' attribute paths, built from the host's tools.
#
# Attribute paths, checked in nixpkgs (nixos-25.11 era):
#   rustPlatform.buildRustPackage   pkgs/build-support/rust/build-rust-package
#   buildGoModule                   pkgs/build-support/go/module.nix
#   writeShellApplication, symlinkJoin   pkgs/build-support/trivial-builders
#   mkShell                         pkgs/build-support/mkshell
#   bpftrace, inferno, perf         pkgs/by-name/{bp/bpftrace,in/inferno,pe/perf}; perf moved
#                                   there from linuxPackages.perf, which warns since 2025-08-28
#                                   (pkgs/top-level/linux-kernels.nix) and is refused here
#   libbpf                          pkgs/os-specific/linux/libbpf
#   go clang shellcheck chromium pkg-config elfutils zlib coreutils, and cargo rustc clippy
#   rustfmt (inherited from rustPackages)   long-standing top-level attributes
# A name that is not here fails evaluation with nixpkgs' own error: attribute '...' missing.
{ lib, system }:
let
  builder = ./builder.sh;

  # Where the host's toolchains are, when the caller knows (scripts/test-nix.sh writes host.nix
  # into its copy); else builder.sh looks in ~/.cargo, /usr/local/cargo and /usr/local/go.
  host = if builtins.pathExists ./host.nix then import ./host.nix else { };
  hostEnv = {
    hostPath = host.path or "";
    hostCargoHome = host.cargoHome or "";
    hostRustupHome = host.rustupHome or "";
  };

  # A derivation built by builder.sh's function `build_<kind>`, with meta and passthru kept
  # out of the builder's environment as mkDerivation does.
  mkDrv =
    kind:
    {
      name,
      meta ? { },
      passthru ? { },
      ...
    }@args:
    let
      env = removeAttrs args [
        "meta"
        "passthru"
      ];
    in
    derivation (
      env
      // hostEnv
      // {
        inherit system;
        builder = "/bin/bash";
        args = [
          "-e"
          builder
          kind
        ];
      }
    )
    // {
      inherit meta;
    }
    // passthru;

  # A tool nixpkgs builds; here, symlinks to the host's binaries of that name (the build fails,
  # naming them, when the host lacks one). Only devShells name most of these; the offline check
  # evaluates them and never builds them.
  hostTool =
    pname: bins:
    mkDrv "host_tool" {
      name = "${pname}-host";
      inherit pname bins;
      meta.mainProgram = builtins.head bins;
    };

  # A library nixpkgs builds; here, the host's (the host's compiler finds it): an empty output.
  hostLibrary =
    pname:
    mkDrv "host_library" {
      name = "${pname}-host";
      inherit pname;
    };

  # nixpkgs' importCargoLock reads the lock file at evaluation; so does this, so a missing
  # lock file fails `nix eval` the same way. Git dependencies need outputHashes there too.
  importCargoLock =
    {
      lockFile,
      outputHashes ? { },
    }:
    let
      parsed = builtins.fromTOML (builtins.readFile lockFile);
      gitPackages = builtins.filter (p: lib.hasPrefix "git+" (p.source or "")) (parsed.package or [ ]);
      missing = builtins.filter (p: !(outputHashes ? "${p.name}-${p.version}")) gitPackages;
    in
    if missing != [ ] then
      throw "No hash was found while vendoring the git dependency ${(builtins.head missing).name}-${(builtins.head missing).version}. You can add a hash through the `outputHashes` argument of `importCargoLock`"
    else
      lockFile;

  buildRustPackage =
    {
      pname,
      version,
      src,
      cargoLock ? null,
      cargoHash ? null,
      cargoBuildFlags ? [ ],
      nativeBuildInputs ? [ ],
      buildInputs ? [ ],
      postInstall ? "",
      meta ? { },
      ...
    }@args:
    let
      lockFile =
        if cargoLock != null then
          importCargoLock cargoLock
        else if cargoHash != null then
          throw "TEST DOUBLE: cargoHash (fetchCargoVendor) is not modelled; use cargoLock.lockFile"
        else
          throw "cargoHash, cargoVendorDir, cargoDeps, or cargoLock must be set";
      cargoDeps = mkDrv "cargo_vendor" {
        name = "cargo-vendor-dir";
        inherit src lockFile;
      };
    in
    mkDrv "cargo_build" {
      name = "${pname}-${version}";
      inherit
        pname
        version
        src
        lockFile
        cargoDeps
        cargoBuildFlags
        nativeBuildInputs
        buildInputs
        postInstall
        meta
        ;
      hardeningDisable = args.hardeningDisable or [ ];
      passthru = {
        inherit cargoDeps;
      };
    };

  buildGoModule =
    {
      pname,
      version,
      src,
      vendorHash ? throw (
        if args ? vendorSha256 then
          "buildGoModule: Expect vendorHash instead of vendorSha256"
        else
          "buildGoModule: vendorHash is missing"
      ),
      nativeBuildInputs ? [ ],
      postInstall ? "",
      meta ? { },
      ...
    }@args:
    assert
      vendorHash == null
      || throw "TEST DOUBLE: only vendorHash = null (no modules to download) is modelled";
    mkDrv "go_build" {
      name = "${pname}-${version}";
      inherit
        pname
        version
        src
        nativeBuildInputs
        postInstall
        meta
        ;
    };

  # nixpkgs' writeShellApplication: the same preamble, and bash -n plus shellcheck when built.
  writeShellApplication =
    {
      name,
      text,
      runtimeInputs ? [ ],
      runtimeEnv ? null,
      meta ? { },
      passthru ? { },
      bashOptions ? [
        "errexit"
        "nounset"
        "pipefail"
      ],
      ...
    }:
    mkDrv "write_script" {
      inherit name passthru;
      meta = {
        mainProgram = name;
      }
      // meta;
      destination = "/bin/${name}";
      text =
        ''
          #!/bin/bash
          ${lib.concatMapStringsSep "\n" (option: "set -o ${option}") bashOptions}
        ''
        + lib.optionalString (runtimeEnv != null) (
          lib.concatStrings (
            lib.mapAttrsToList (name: value: ''
              ${lib.toShellVar name value}
              export ${name}
            '') runtimeEnv
          )
        )
        + lib.optionalString (runtimeInputs != [ ]) ''

          export PATH="${lib.makeBinPath runtimeInputs}:$PATH"
        ''
        + ''

          ${text}
        '';
      passAsFile = [ "text" ];
    };

  symlinkJoin =
    {
      name,
      paths,
      postBuild ? "",
      meta ? { },
      passthru ? { },
      ...
    }:
    mkDrv "symlink_join" {
      inherit
        name
        paths
        postBuild
        meta
        passthru
        ;
    };

  # nixpkgs' mkShell: the inputs of inputsFrom merged in, and not meant to be built.
  mkShell =
    {
      name ? "nix-shell",
      packages ? [ ],
      inputsFrom ? [ ],
      nativeBuildInputs ? [ ],
      buildInputs ? [ ],
      ...
    }@args:
    let
      from = attr: builtins.concatLists (map (d: d.${attr} or [ ]) inputsFrom);
      notFrom = builtins.filter (d: !(builtins.elem d inputsFrom));
    in
    mkDrv "shell" (
      removeAttrs args [
        "packages"
        "inputsFrom"
      ]
      // {
        inherit name;
        nativeBuildInputs = notFrom (packages ++ nativeBuildInputs ++ from "nativeBuildInputs");
        buildInputs = notFrom (buildInputs ++ from "buildInputs");
      }
    );
in
{
  inherit
    buildGoModule
    writeShellApplication
    symlinkJoin
    mkShell
    ;

  rustPlatform = {
    inherit buildRustPackage importCargoLock;
  };

  go = hostTool "go" [
    "go"
    "gofmt"
  ];
  cargo = hostTool "cargo" [ "cargo" ];
  rustc = hostTool "rustc" [
    "rustc"
    "rustdoc"
  ];
  clippy = hostTool "clippy" [
    "cargo-clippy"
    "clippy-driver"
  ];
  rustfmt = hostTool "rustfmt" [
    "rustfmt"
    "cargo-fmt"
  ];
  clang = hostTool "clang" [ "clang" ];
  bpftrace = hostTool "bpftrace" [ "bpftrace" ];
  perf = hostTool "perf" [ "perf" ];
  inferno = hostTool "inferno" [
    "inferno-flamegraph"
    "inferno-collapse-perf"
  ];
  shellcheck = hostTool "shellcheck" [ "shellcheck" ];
  chromium = hostTool "chromium" [ "chromium" ];
  pkg-config = hostTool "pkg-config" [ "pkg-config" ];
  coreutils = hostTool "coreutils" [
    "id"
    "readlink"
    "mktemp"
    "date"
  ];

  # pkgs/by-name/in/installShellFiles: a setup hook with installShellCompletion and
  # installManPage (builder.sh's build_setup_hook models the part the flake uses).
  installShellFiles = mkDrv "setup_hook" { name = "install-shell-files"; };

  elfutils = hostLibrary "elfutils";
  zlib = hostLibrary "zlib";
  libbpf = hostLibrary "libbpf";

  # Still an alias in nixpkgs 25.11 (with a warning); the flake must use the top-level `perf`.
  linuxPackages.perf = throw "linuxPackages.perf is now perf (nixpkgs moved it on 2025-08-28; use pkgs.perf)";
}
