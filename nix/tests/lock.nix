# Offline check (scripts/test-nix.sh): flake.lock pins exactly one input, a stable nixpkgs branch,
# at a full revision with its narHash, and it is the branch flake.nix asks for (so `nix flake lock`
# would change nothing). Evaluates to the problems, one per line: "" when there are none.
{ flakeDir }:
let
  inherit (builtins)
    attrNames
    concatStringsSep
    fromJSON
    isInt
    match
    readFile
    ;
  flake = import (flakeDir + "/flake.nix");
  lock = fromJSON (readFile (flakeDir + "/flake.lock"));
  node = lock.nodes.nixpkgs or { };
  locked = node.locked or { };
  original = node.original or { };
  url = flake.inputs.nixpkgs.url or "(none)";
  expectedUrl = "github:${original.owner or "?"}/${original.repo or "?"}/${original.ref or "?"}";
  unless = ok: problem: if ok then [ ] else [ problem ];
in
concatStringsSep "\n" (
  unless (attrNames (flake.inputs or { }) == [ "nixpkgs" ])
    "flake.nix: inputs are [${toString (attrNames (flake.inputs or { }))}]; only nixpkgs is expected"
  ++ unless ((lock.version or 0) == 7) "flake.lock: version ${toString (lock.version or "?")}, expected 7"
  ++ unless (attrNames (lock.nodes or { }) == [
    "nixpkgs"
    "root"
  ]) "flake.lock: nodes are [${toString (attrNames (lock.nodes or { }))}]; expected nixpkgs and root only"
  ++ unless (
    (lock.nodes.root.inputs or { }) == { nixpkgs = "nixpkgs"; }
  ) "flake.lock: the root's inputs are not exactly { nixpkgs = \"nixpkgs\"; }"
  ++ unless (
    original.type or "" == "github" && original.owner or "" == "NixOS" && original.repo or "" == "nixpkgs"
  ) "flake.lock: nixpkgs is not github:NixOS/nixpkgs"
  ++ unless (
    match "nixos-[0-9]+[.][0-9]+" (original.ref or "") != null
  ) "flake.lock: nixpkgs follows '${original.ref or "no branch"}', not a stable nixos-YY.MM branch"
  ++ unless (url == expectedUrl) "flake.nix asks for ${url} but flake.lock pins ${expectedUrl}: run nix flake lock"
  ++ unless (
    locked.type or "" == "github" && locked.owner or "" == original.owner or "" && locked.repo or "" == original.repo or ""
  ) "flake.lock: the locked nixpkgs is not the repository of the original"
  ++ unless (match "[0-9a-f]{40}" (locked.rev or "") != null) "flake.lock: nixpkgs rev '${locked.rev or ""}' is not a full commit hash"
  ++ unless (
    match "sha256-[A-Za-z0-9+/]{43}=" (locked.narHash or "") != null
  ) "flake.lock: nixpkgs narHash '${locked.narHash or ""}' is not a sha256 SRI hash"
  ++ unless (isInt (locked.lastModified or null)) "flake.lock: nixpkgs has no lastModified"
)
