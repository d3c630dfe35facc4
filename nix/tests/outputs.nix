# Offline check (scripts/test-nix.sh): what the flake's outputs must be. The first three are
# `nix eval --apply` functions that reduce an output to JSON (asking for every drvPath evaluates
# every derivation and everything it depends on); `report` reads that JSON back and gives lines:
#   PROBLEM <what is wrong>
#   EXE <label> <path> <package>     an executable that must exist once <package> is built
#   SCRIPT <package> <index> <name>  a writeShellApplication text, for shellcheck
let
  inherit (builtins)
    attrNames
    concatLists
    concatStringsSep
    filter
    genList
    length
    elemAt
    listToAttrs
    mapAttrs
    ;
  systems = [
    "aarch64-linux"
    "x86_64-linux"
  ];
  mapAttrsToList = f: attrs: map (n: f n attrs.${n}) (attrNames attrs);
  missing = wanted: present: filter (n: !(builtins.elem n present)) wanted;
  filterAttrs =
    pred: attrs:
    listToAttrs (filter (e: pred e.name e.value) (mapAttrsToList (name: value: { inherit name value; }) attrs));
in
{
  packages = mapAttrs (
    _system:
    mapAttrs (
      _name: p: {
        # (not `outPath`: toJSON would print such a set as that path)
        inherit (p) drvPath;
        out = p.outPath;
        mainProgram = p.meta.mainProgram or null;
        scripts = map (q: { inherit (q) name text; }) (filter (q: q ? text) ([ p ] ++ p.paths or [ ]));
      }
    )
  );

  apps = mapAttrs (
    _system:
    mapAttrs (
      _name: a: {
        type = a.type or null;
        program = a.program or null;
      }
    )
  );

  devShells = mapAttrs (_system: mapAttrs (_name: d: d.drvPath));

  report =
    {
      packages,
      apps,
      devShells,
      system,
    }:
    let
      exe = p: if p.mainProgram == null then null else "${p.out}/bin/${p.mainProgram}";
      # program -> the package whose main program it is
      mainPrograms =
        sys:
        listToAttrs (
          filter (e: e.name != null) (
            mapAttrsToList (n: p: {
              name = exe p;
              value = n;
            }) (packages.${sys} or { })
          )
        );
      problem = msg: "PROBLEM ${msg}";

      shape =
        map (s: problem "packages: no ${s}") (missing systems (attrNames packages))
        ++ map (s: problem "apps: no ${s}") (missing systems (attrNames apps))
        ++ map (s: problem "devShells: no ${s}") (missing systems (attrNames devShells))
        ++ concatLists (
          map (
            sys:
            map (n: problem "packages.${sys}: no ${n}") (
              missing [
                "default"
                "threads"
                "goroutines"
                "tokio-tasks"
                "processes"
                "spawnscope"
              ] (attrNames (packages.${sys} or { }))
            )
            ++ map (n: problem "apps.${sys}: no ${n}") (
              missing [
                "default"
                "threads"
                "goroutines"
                "tokio-tasks"
                "processes"
                "spawnscope"
              ] (attrNames (apps.${sys} or { }))
            )
            ++ map (n: problem "devShells.${sys}: no ${n}") (
              missing [ "default" ] (attrNames (devShells.${sys} or { }))
            )
          ) systems
        );

      mainProgramProblems = concatLists (
        mapAttrsToList (
          sys: ps:
          concatLists (
            mapAttrsToList (
              n: p: if p.mainProgram == null then [ (problem "packages.${sys}.${n}: no meta.mainProgram") ] else [ ]
            ) ps
          )
        ) packages
      );

      appProblems = concatLists (
        mapAttrsToList (
          sys: as:
          concatLists (
            mapAttrsToList (
              n: a:
              if a.type != "app" then
                [ (problem "apps.${sys}.${n}: type is ${toString a.type}, not \"app\"") ]
              else if !((mainPrograms sys) ? ${toString a.program}) then
                [
                  (problem "apps.${sys}.${n}: program ${toString a.program} is not the main program (bin/<meta.mainProgram>) of any package of packages.${sys}")
                ]
              else
                [ ]
            ) as
          )
        ) apps
      );

      here = packages.${system} or { };
      # The apps first: a missing binary is reported as the app that would run it.
      exes =
        mapAttrsToList (
          n: a: "EXE apps.${system}.${n} ${a.program} ${(mainPrograms system).${a.program}}"
        ) (filterAttrs (_: a: (mainPrograms system) ? ${toString a.program}) (apps.${system} or { }))
        ++ mapAttrsToList (n: p: "EXE packages.${system}.${n} ${exe p} ${n}") (
          filterAttrs (_: p: p.mainProgram != null) here
        );

      scripts = concatLists (
        mapAttrsToList (
          n: p: genList (i: "SCRIPT ${n} ${toString i} ${(elemAt p.scripts i).name}") (length p.scripts)
        ) here
      );
    in
    concatStringsSep "\n" (shape ++ mainProgramProblems ++ appProblems ++ exes ++ scripts);
}
