/* tinycc-ml AVR runner: drives libsimavr (ATmega328P @ 16 MHz) for one batch of inputs.
 *
 * usage: avr_runner firmware.bin inputs.bin outputs.bin max_cycles max_cycles_per_call [mcu clock_hz [profile]]
 *
 * Protocol with the firmware (tcm_avr_harness.c):
 *   GPIOR2 read  -> next byte of inputs.bin (0 once the file is exhausted)
 *   GPIOR0 write -> byte appended to outputs.bin
 *   GPIOR1 write -> stamp: odd code opens a bracket, the next even code closes it; for each
 *                   closed bracket a line "B <code> <cycles> <stack bytes>" goes to stdout.
 * The stack high-water mark is the lowest SP seen while a bracket is open, taken after every
 * instruction (the runner single-steps), relative to SP when the bracket opened.
 * With a profile path, the cycles spent at each program address inside code-3 brackets (the timed
 * calls) are summed and written there as "<byte address> <cycles>" lines (benchmarks map them to
 * symbols for per-kernel breakdowns).
 * Exit status: 0 clean end (cli; sleep), 3 crash, 4 cycle cap hit (total or one bracket), 2 usage/IO error.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_avr.h"
#include "sim_io.h"

#define A_GPIOR0 0x3E
#define A_GPIOR1 0x4A
#define A_GPIOR2 0x4B
#define A_SPL 0x5D
#define A_SPH 0x5E

static uint8_t *in_buf;
static size_t in_len, in_pos;
static FILE *out_f;
static int open_code = -1;
static avr_cycle_count_t open_cycle;
static unsigned open_sp, min_sp;
static unsigned long long *profile; /* cycles per flash word, or NULL */

static unsigned get_sp(avr_t *avr) { return avr->data[A_SPL] | (avr->data[A_SPH] << 8); }

static uint8_t rd_input(avr_t *avr, avr_io_addr_t addr, void *param)
{
	(void)avr; (void)addr; (void)param;
	return in_pos < in_len ? in_buf[in_pos++] : 0;
}

static void wr_output(avr_t *avr, avr_io_addr_t addr, uint8_t v, void *param)
{
	(void)avr; (void)addr; (void)param;
	fputc(v, out_f);
}

static void wr_stamp(avr_t *avr, avr_io_addr_t addr, uint8_t v, void *param)
{
	(void)addr; (void)param;
	if (v & 1) {
		open_code = v;
		open_cycle = avr->cycle;
		open_sp = min_sp = get_sp(avr);
	} else {
		printf("B %d %llu %u\n", v, (unsigned long long)(avr->cycle - open_cycle), open_sp - min_sp);
		open_code = -1;
	}
}

static uint8_t *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f) return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
	if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) { fclose(f); return NULL; }
	fclose(f);
	*len = (size_t)n;
	return buf;
}

int main(int argc, char **argv)
{
	if (argc != 6 && argc != 8 && argc != 9) {
		fprintf(stderr, "usage: %s fw.bin in.bin out.bin max_cycles max_cycles_per_call [mcu clock_hz [profile]]\n",
		        argv[0]);
		return 2;
	}
	size_t fw_len;
	uint8_t *fw = read_file(argv[1], &fw_len);
	in_buf = read_file(argv[2], &in_len);
	out_f = fopen(argv[3], "wb");
	unsigned long long max_cycles = strtoull(argv[4], NULL, 10);
	unsigned long long max_call = strtoull(argv[5], NULL, 10);
	if (!fw || !in_buf || !out_f) { fprintf(stderr, "avr_runner: cannot read/write files\n"); return 2; }

	const char *mcu = argc >= 8 ? argv[6] : "atmega328p";
	avr_t *avr = avr_make_mcu_by_name(mcu);
	if (!avr) { fprintf(stderr, "avr_runner: no %s core in libsimavr\n", mcu); return 2; }
	avr_init(avr);
	avr->log = LOG_ERROR;
	avr->frequency = argc >= 8 ? (uint32_t)strtoul(argv[7], NULL, 10) : 16000000;
	if (fw_len > (size_t)avr->flashend + 1) {
		fprintf(stderr, "avr_runner: firmware larger than the %s's flash\n", mcu);
		return 2;
	}
	avr_loadcode(avr, fw, (uint32_t)fw_len, 0);
	avr->codeend = (uint32_t)fw_len;
	avr_register_io_read(avr, A_GPIOR2, rd_input, NULL);
	avr_register_io_write(avr, A_GPIOR0, wr_output, NULL);
	avr_register_io_write(avr, A_GPIOR1, wr_stamp, NULL);

	unsigned words = ((unsigned)avr->flashend + 1) / 2;
	if (argc == 9 && !(profile = calloc(words, sizeof *profile))) return 2;
	int state = cpu_Running;
	while (1) {
		avr_flashaddr_t pc = avr->pc;
		avr_cycle_count_t before = avr->cycle;
		state = avr_run(avr);
		if (profile && open_code == 3 && pc / 2 < words)
			profile[pc / 2] += avr->cycle - before;
		if (open_code >= 0) {
			unsigned sp = get_sp(avr);
			if (sp < min_sp) min_sp = sp;
			if (avr->cycle - open_cycle > max_call) {
				fprintf(stderr, "avr_runner: a measured call ran over %llu cycles (pc=0x%x): hang?\n",
					max_call, avr->pc);
				fclose(out_f);
				return 4;
			}
		}
		if (state == cpu_Done || state == cpu_Crashed) break;
		if (avr->cycle > max_cycles) break;
	}
	fclose(out_f);
	if (profile) {
		FILE *pf = fopen(argv[8], "w");
		if (!pf) return 2;
		for (unsigned i = 0; i < words; i++)
			if (profile[i]) fprintf(pf, "%u %llu\n", 2 * i, profile[i]);
		fclose(pf);
	}
	printf("E %d %llu %zu\n", state, (unsigned long long)avr->cycle, in_pos);
	fflush(stdout);
	if (state == cpu_Done) return 0;
	if (state == cpu_Crashed) { fprintf(stderr, "avr_runner: firmware crashed at pc=0x%x\n", avr->pc); return 3; }
	fprintf(stderr, "avr_runner: cycle cap %llu reached at pc=0x%x\n", max_cycles, avr->pc);
	return 4;
}
