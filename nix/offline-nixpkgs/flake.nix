# TEST DOUBLE — NOT NIXPKGS. A stand-in for the one nixpkgs input of ../../flake.nix, for machines
# that cannot fetch nixpkgs (CI: package registries only). It implements only what that flake
# uses, under the same attribute paths as the pinned nixpkgs (nixos-25.11, see flake.lock), and
# builds with the HOST's cargo and go instead of Nix-built toolchains:
#
#   nix run --override-input nixpkgs path:./nix/offline-nixpkgs .#goroutines -- hold --n 1000
#
# What it models faithfully enough to fail like nixpkgs would: a missing attribute (`pkgs.foo`
# that nixpkgs does not have), buildRustPackage without cargoLock/cargoHash, a cargoLock.lockFile
# that does not exist (both read at evaluation, as importCargoLock does), buildGoModule without
# vendorHash, writeShellApplication's shebang/errexit/PATH preamble and its shellcheck at build
# time, lib.getExe's bin/<meta.mainProgram>. What it does not: real store paths of nixpkgs, the
# toolchain versions nixpkgs pins, sandboxed builds, stdenv (setup hooks, hardening, strip, check
# phases), the tools themselves (the tool packages are symlinks to the host's binaries).
# Builds need the host's toolchains: run nix as root with --option build-users-group '' (the
# builder reads ~/.cargo and ~/.rustup of the user it runs as) and no sandbox.
# Every attribute here was checked against nixpkgs (see pkgs.nix). Used by ../../scripts/test-nix.sh.
{
  description = "TEST DOUBLE for nixpkgs (offline checks of spawnscope's flake); not nixpkgs";

  outputs =
    { self }:
    let
      lib = import ./lib.nix;
    in
    {
      inherit lib;
      legacyPackages = lib.genAttrs [ "x86_64-linux" "aarch64-linux" ] (
        system: import ./pkgs.nix { inherit lib system; }
      );
    };
}
