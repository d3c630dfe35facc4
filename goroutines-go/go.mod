module spawnscope/goroutines

go 1.19
