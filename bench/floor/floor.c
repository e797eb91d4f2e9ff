/*
 * floor: the least CPU an open-loop generator can spend at a fixed rate on
 * this machine, for bench/peers to print beside the real tools. One thread,
 * one keep-alive connection, a timerfd for the schedule and epoll for both:
 * per request one timer wake, one write, one wake for the response and its
 * read. No HTTP parsing beyond counting responses, no results kept.
 *
 *   floor 127.0.0.1:8080 2000 10000   # address, rate per second, requests
 *
 * Prints "cpu_s <user+system seconds> requests <n>". Loopback only; stops
 * after the last response or two seconds after the last request.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

static void at(struct itimerspec *its, const struct timespec *t0, long long ns) {
	ns += t0->tv_nsec;
	its->it_value.tv_sec = t0->tv_sec + ns / 1000000000;
	its->it_value.tv_nsec = ns % 1000000000;
}

int main(int argc, char **argv) {
	if (argc != 4) {
		fprintf(stderr, "usage: floor 127.0.0.1:PORT RATE REQUESTS\n");
		return 2;
	}
	char host[64];
	snprintf(host, sizeof host, "%s", argv[1]);
	char *colon = strrchr(host, ':');
	if (!colon) {
		fprintf(stderr, "floor: address must be 127.0.0.1:PORT\n");
		return 2;
	}
	*colon = 0;
	struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(atoi(colon + 1))};
	if (inet_pton(AF_INET, host, &addr.sin_addr) != 1 || (ntohl(addr.sin_addr.s_addr) >> 24) != 127) {
		fprintf(stderr, "floor: %s is not a loopback address\n", host);
		return 2;
	}
	long long gap = 1000000000LL / atoll(argv[2]);
	long n = atol(argv[3]);

	int s = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(s, (struct sockaddr *)&addr, sizeof addr) != 0) {
		perror("floor: connect");
		return 1;
	}
	int tf = timerfd_create(CLOCK_MONOTONIC, 0);
	int ep = epoll_create1(0);
	struct epoll_event ev = {.events = EPOLLIN, .data.fd = tf};
	epoll_ctl(ep, EPOLL_CTL_ADD, tf, &ev);
	ev.data.fd = s;
	epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev);

	const char req[] = "GET / HTTP/1.1\r\nHost: floor\r\n\r\n";
	const char mark[] = "HTTP/1.1 ";
	char buf[8192];
	long sent = 0, got = 0;
	size_t matched = 0; /* bytes of mark matched across reads */
	struct timespec t0;
	struct itimerspec its = {0};
	clock_gettime(CLOCK_MONOTONIC, &t0);
	at(&its, &t0, 0);
	timerfd_settime(tf, TFD_TIMER_ABSTIME, &its, NULL);
	while (got < n) {
		struct epoll_event evs[2];
		int k = epoll_wait(ep, evs, 2, sent == n ? 2000 : -1);
		if (k == 0)
			break;
		for (int i = 0; i < k; i++) {
			if (evs[i].data.fd == tf) {
				unsigned long long ticks;
				if (read(tf, &ticks, sizeof ticks) < 0 || sent == n)
					continue;
				if (write(s, req, sizeof req - 1) != (ssize_t)(sizeof req - 1)) {
					perror("floor: write");
					return 1;
				}
				sent++;
				at(&its, &t0, gap * sent);
				timerfd_settime(tf, TFD_TIMER_ABSTIME, &its, NULL);
				continue;
			}
			ssize_t r = read(s, buf, sizeof buf);
			if (r <= 0) {
				fprintf(stderr, "floor: the server closed the connection\n");
				return 1;
			}
			for (ssize_t j = 0; j < r; j++) {
				matched = buf[j] == mark[matched] ? matched + 1 : (buf[j] == mark[0]);
				if (matched == sizeof mark - 1) {
					got++;
					matched = 0;
				}
			}
		}
	}
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	printf("cpu_s %.3f requests %ld\n", ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6, got);
	return got == n ? 0 : 1;
}
