# TEST DOUBLE — NOT NIXPKGS. The few `lib` functions spawnscope's flake (and pkgs.nix) use, with
# nixpkgs' names and meanings (nixpkgs/lib). Nothing else is here, on purpose: a function the
# flake starts using must be added, which is the moment to check it exists in the pinned nixpkgs.
let
  lib = rec {
    genAttrs = names: f: builtins.listToAttrs (map (n: { name = n; value = f n; }) names);

    hasPrefix = prefix: s: builtins.substring 0 (builtins.stringLength prefix) s == prefix;

    optionalString = cond: s: if cond then s else "";

    concatStrings = builtins.concatStringsSep "";

    concatMapStringsSep = sep: f: list: builtins.concatStringsSep sep (map f list);

    mapAttrsToList = f: attrs: map (name: f name attrs.${name}) (builtins.attrNames attrs);

    makeBinPath = paths: concatMapStringsSep ":" (p: "${p}/bin") paths;

    # nixpkgs' escapeShellArg: unquoted when only safe characters, else single quotes.
    escapeShellArg =
      arg:
      let
        s = toString arg;
      in
      if builtins.match "[[:alnum:],._+:@%/-]+" s != null then
        s
      else
        "'${builtins.replaceStrings [ "'" ] [ "'\\''" ] s}'";

    toShellVar = name: value: "${name}=${escapeShellArg value}";

    isDerivation = x: builtins.isAttrs x && (x.type or null) == "derivation";

    getName = x: x.pname or (builtins.parseDrvName x.name).name;

    # nixpkgs' getExe: bin/<meta.mainProgram>, warning (not failing) when it is missing.
    getExe =
      x:
      assert isDerivation x;
      let
        main =
          x.meta.mainProgram or (builtins.trace
            "warning: getExe: Package ${getName x} does not have the meta.mainProgram attribute."
            (getName x)
          );
      in
      "${x}/bin/${main}";

    # nixpkgs' cleanSourceWith: a filtered copy of the source, named, by content.
    cleanSourceWith =
      {
        src,
        filter ? _path: _type: true,
        name ? "source",
      }:
      builtins.path {
        path = src;
        inherit name filter;
      };

    licenses.mit = {
      spdxId = "MIT";
      shortName = "mit";
      fullName = "MIT License";
      free = true;
    };

    platforms.linux = [
      "aarch64-linux"
      "armv7l-linux"
      "i686-linux"
      "riscv64-linux"
      "x86_64-linux"
    ];
  };
in
lib
