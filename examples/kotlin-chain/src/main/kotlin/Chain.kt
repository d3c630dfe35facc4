// bench-of-chan's experiment on kotlinx.coroutines (elsejj, 2022, its Kotlin side): -w receivers,
// each with a Channel of capacity -q; -w senders, sender i sending -e events of type -t to
// receiver i. Speed = w × e / the time from releasing the senders (all coroutines launched) to the
// last receiver's end. As the article's Kotlin program, a warm-up run with fixed sizes first
// (1,000 workers × 1,000 events, same type and queue) so that the JIT has compiled the loop.
// Prints one line in the article's CSV shape: kotlin,etype,worker,event,time,speed.
import java.util.concurrent.atomic.AtomicLong
import kotlin.system.exitProcess
import kotlinx.coroutines.CompletableDeferred
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.channels.Channel
import kotlinx.coroutines.joinAll
import kotlinx.coroutines.launch
import kotlinx.coroutines.runBlocking

// The article's event kinds: an int, a wrapper around shared string content (Kotlin strings are
// immutable: its "str"), the one shared String itself (its "str_ptr"), a full copy ("str_clone").
interface Event { fun ok(): Boolean }
class IntEvent(val value: Long) : Event { override fun ok() = value >= 0 }
class StrEvent(val value: String) : Event { override fun ok() = value.isNotEmpty() }
class CheapStrEvent(val value: String) : Event { override fun ok() = value.isNotEmpty() }

val ETYPES = listOf("int", "str", "str_ptr", "str_clone")

fun usage(why: String): Nothing {
    System.err.println("chain: $why; usage: ChainKt -w WORKERS -e EVENTS [-q QUEUE] [-t int|str|str_ptr|str_clone|0-3] [-s SIZE]")
    exitProcess(2)
}

/** Seconds from releasing the senders to the last receiver's end, and the events received. */
fun run(workers: Int, events: Int, queue: Int, etype: String, size: Int): Pair<Double, Long> {
    val shared = "x".repeat(size)
    val cheap = CheapStrEvent(shared)
    val make: (Int) -> Event = when (etype) {
        "int" -> { i -> IntEvent(i.toLong()) }
        "str" -> { _ -> StrEvent(shared) }
        "str_ptr" -> { _ -> cheap }
        else -> { _ -> StrEvent(String(shared.toCharArray())) }
    }
    val received = AtomicLong()
    var seconds = 0.0
    runBlocking(Dispatchers.Default) {
        val gate = CompletableDeferred<Unit>()
        val channels = List(workers) { Channel<Event>(queue) }
        val jobs = channels.map { ch ->
            launch {
                var n = 0L
                for (e in ch) if (e.ok()) n++
                received.addAndGet(n)
            }
        } + channels.map { ch ->
            launch {
                gate.await()
                for (i in 0 until events) ch.send(make(i))
                ch.close()
            }
        }
        val start = System.nanoTime()
        gate.complete(Unit)
        jobs.joinAll()
        seconds = (System.nanoTime() - start) / 1e9
    }
    return Pair(seconds, received.get())
}

fun main(args: Array<String>) {
    var workers = 0
    var events = 0
    var queue = 256
    var etype = "int"
    var size = 16
    var i = 0
    while (i < args.size) {
        val flag = args[i]
        val value = args.getOrNull(i + 1) ?: usage("$flag needs a value")
        fun count(): Int = value.toIntOrNull()?.takeIf { it > 0 } ?: usage("$flag '$value' is not a positive whole number")
        when (flag) {
            "-w" -> workers = count()
            "-e" -> events = count()
            "-q" -> queue = count()
            "-s" -> size = count()
            "-t" -> etype = value.toIntOrNull()?.let { ETYPES.getOrNull(it) } ?: value.takeIf { it in ETYPES }
                ?: usage("-t '$value' is not one of ${ETYPES.joinToString()} (or 0-3)")
            else -> usage("unknown flag '$flag'")
        }
        i += 2
    }
    if (workers == 0 || events == 0) usage("-w and -e are needed")
    run(1_000, 1_000, queue, etype, size)
    val (seconds, received) = run(workers, events, queue, etype, size)
    val total = workers.toLong() * events
    if (received != total) {
        System.err.println("chain: received $received of $total events")
        exitProcess(1)
    }
    println("kotlin,$etype,$workers,$events,${"%.3f".format(seconds)},${(total / seconds).toLong()}")
}
