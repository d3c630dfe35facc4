module spawnscope/tests/gotraced

go 1.22
