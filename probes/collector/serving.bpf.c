// SPDX-License-Identifier: (MIT OR GPL-2.0)
/*
 * The syscalls that serve requests (Config::net_syscalls only).
 *
 * A part of ../collector.bpf.c, which includes it after common.bpf.h: not compiled alone.
 */

/*
 * The syscalls that serve requests (accept, reads, writes, readiness, close), loaded only with
 * Config::net_syscalls: their tracepoints fire on every such call of every process on the machine
 * (a load generator's included), so each syscall has one program, at its return, where the
 * result is: the call, the bytes it moved, whether it found nothing to do (EAGAIN). A call counts
 * in the phase it returns in. The filter comes first: the run's tasks, then one per-CPU counter
 * vector.
 */
static __always_inline struct vec_counters *net_vec(void)
{
	if (!current_is_target())
		return NULL;
	return phase_vec();
}

/* read, write and their kin: calls, bytes moved (ret > 0), EAGAIN returns. */
static __always_inline void net_io(long ret, __u32 calls, __u32 bytes, __u32 eagain)
{
	struct vec_counters *c = net_vec();

	if (!c)
		return;
	c->v[calls] += 1;
	if (ret > 0)
		c->v[bytes] += ret;
	else if (ret == -EAGAIN)
		c->v[eagain] += 1;
}

/* accept, accept4: calls, failures (any errno), EAGAIN among them (nothing waiting). */
static __always_inline void net_accept(long ret, __u32 calls, __u32 failed, __u32 eagain)
{
	struct vec_counters *c = net_vec();

	if (!c)
		return;
	c->v[calls] += 1;
	if (ret < 0) {
		c->v[failed] += 1;
		if (ret == -EAGAIN)
			c->v[eagain] += 1;
	}
}

/* epoll_wait and kin: calls, and calls that returned no event (the timeout passed). */
static __always_inline void net_wait(long ret, __u32 calls, __u32 empty)
{
	struct vec_counters *c = net_vec();

	if (!c)
		return;
	c->v[calls] += 1;
	if (ret == 0)
		c->v[empty] += 1;
}

static __always_inline void net_call(__u32 calls)
{
	struct vec_counters *c = net_vec();

	if (c)
		c->v[calls] += 1;
}

SEC("tracepoint/syscalls/sys_exit_read")
int tp_sys_exit_read(struct tp_sys_exit *ctx)
{
	RAN(SC_P_SYS_EXIT_READ);
	net_io(ctx->ret, SC_READ_CALLS, SC_READ_BYTES, SC_READ_EAGAIN);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_readv")
int tp_sys_exit_readv(struct tp_sys_exit *ctx)
{
	RAN(SC_P_SYS_EXIT_READV);
	net_io(ctx->ret, SC_READV_CALLS, SC_READV_BYTES, SC_READV_EAGAIN);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_recvfrom")
int tp_sys_exit_recvfrom(struct tp_sys_exit *ctx)
{
	RAN(SC_P_SYS_EXIT_RECVFROM);
	net_io(ctx->ret, SC_RECVFROM_CALLS, SC_RECVFROM_BYTES, SC_RECVFROM_EAGAIN);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_recvmsg")
int tp_sys_exit_recvmsg(struct tp_sys_exit *ctx)
{
	RAN(SC_P_SYS_EXIT_RECVMSG);
	net_io(ctx->ret, SC_RECVMSG_CALLS, SC_RECVMSG_BYTES, SC_RECVMSG_EAGAIN);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_write")
int tp_sys_exit_write(struct tp_sys_exit *ctx)
{
	RAN(SC_P_SYS_EXIT_WRITE);
	net_io(ctx->ret, SC_WRITE_CALLS, SC_WRITE_BYTES, SC_WRITE_EAGAIN);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_writev")
int tp_sys_exit_writev(struct tp_sys_exit *ctx)
{
	RAN(SC_P_SYS_EXIT_WRITEV);
	net_io(ctx->ret, SC_WRITEV_CALLS, SC_WRITEV_BYTES, SC_WRITEV_EAGAIN);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_sendto")
int tp_sys_exit_sendto(struct tp_sys_exit *ctx)
{
	RAN(SC_P_SYS_EXIT_SENDTO);
	net_io(ctx->ret, SC_SENDTO_CALLS, SC_SENDTO_BYTES, SC_SENDTO_EAGAIN);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_sendmsg")
int tp_sys_exit_sendmsg(struct tp_sys_exit *ctx)
{
	RAN(SC_P_SYS_EXIT_SENDMSG);
	net_io(ctx->ret, SC_SENDMSG_CALLS, SC_SENDMSG_BYTES, SC_SENDMSG_EAGAIN);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_accept")
int tp_sys_exit_accept(struct tp_sys_exit *ctx)
{
	RAN(SC_P_SYS_EXIT_ACCEPT);
	net_accept(ctx->ret, SC_ACCEPT_CALLS, SC_ACCEPT_FAILED, SC_ACCEPT_EAGAIN);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_accept4")
int tp_sys_exit_accept4(struct tp_sys_exit *ctx)
{
	RAN(SC_P_SYS_EXIT_ACCEPT4);
	net_accept(ctx->ret, SC_ACCEPT4_CALLS, SC_ACCEPT4_FAILED, SC_ACCEPT4_EAGAIN);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_epoll_wait")
int tp_sys_exit_epoll_wait(struct tp_sys_exit *ctx)
{
	RAN(SC_P_SYS_EXIT_EPOLL_WAIT);
	net_wait(ctx->ret, SC_EPOLL_WAIT_CALLS, SC_EPOLL_WAIT_EMPTY);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_epoll_pwait")
int tp_sys_exit_epoll_pwait(struct tp_sys_exit *ctx)
{
	RAN(SC_P_SYS_EXIT_EPOLL_PWAIT);
	net_wait(ctx->ret, SC_EPOLL_PWAIT_CALLS, SC_EPOLL_PWAIT_EMPTY);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_epoll_pwait2")
int tp_sys_exit_epoll_pwait2(struct tp_sys_exit *ctx)
{
	RAN(SC_P_SYS_EXIT_EPOLL_PWAIT2);
	net_wait(ctx->ret, SC_EPOLL_PWAIT2_CALLS, SC_EPOLL_PWAIT2_EMPTY);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_epoll_ctl")
int tp_sys_exit_epoll_ctl(struct tp_sys_exit *ctx)
{
	RAN(SC_P_SYS_EXIT_EPOLL_CTL);
	net_call(SC_EPOLL_CTL_CALLS);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_poll")
int tp_sys_exit_poll(struct tp_sys_exit *ctx)
{
	RAN(SC_P_SYS_EXIT_POLL);
	net_call(SC_POLL_CALLS);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_ppoll")
int tp_sys_exit_ppoll(struct tp_sys_exit *ctx)
{
	RAN(SC_P_SYS_EXIT_PPOLL);
	net_call(SC_PPOLL_CALLS);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_close")
int tp_sys_exit_close(struct tp_sys_exit *ctx)
{
	RAN(SC_P_SYS_EXIT_CLOSE);
	net_call(SC_CLOSE_CALLS);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_shutdown")
int tp_sys_exit_shutdown(struct tp_sys_exit *ctx)
{
	RAN(SC_P_SYS_EXIT_SHUTDOWN);
	net_call(SC_SHUTDOWN_CALLS);
	return 0;
}
