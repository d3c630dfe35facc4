module spawnscope/tests/sleepers

go 1.22
