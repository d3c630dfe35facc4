module spawnscope/tests/cgo-threads

go 1.22
