// csharp-sleepers: N tasks of Task.Delay(10 s), awaited with Task.WhenAll — the C# program of
// async-runtimes-benchmarks-2024 ("Take 2", hez2010) in the shape it was published, which put
// 3.59 / 7.56 / 30.0 / 196.6 MB at 1 / 10,000 / 100,000 / 1,000,000 tasks with .NET 9
// NativeAOT. Like the article's, it has no knob for the 10 s.
//
//     csharp-sleepers N   (dotnet publish -c Release -o DIR: NativeAOT, see Sleepers.csproj)

if (args.Length < 1 || !int.TryParse(args[0], out int numTasks) || numTasks < 1)
{
    Console.Error.WriteLine("usage: csharp-sleepers N (a whole number of tasks, at least 1)");
    return 2;
}
List<Task> tasks = new List<Task>(numTasks);
for (int i = 0; i < numTasks; i++)
{
    tasks.Add(Task.Delay(TimeSpan.FromSeconds(10)));
}
await Task.WhenAll(tasks);
return 0;
