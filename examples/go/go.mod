module spawnscope/examples/go

go 1.22
