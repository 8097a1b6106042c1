/* stdout on the nRF51822's UART (TX on P0.24: the BBC micro:bit's USB serial port) at 115200 baud, and the
 * newlib system calls printf needs (_write, _sbrk, ...): tinycc_ml_add_firmware adds this file to Cortex-M0
 * executables, so printf works in main with no UART code. The UART is set up at the first write; the heap
 * (printf's buffers: the model itself takes none) grows from the end of .bss up to 256 bytes below the stack
 * pointer; _exit ends the run with an ARM semihosting exit (QEMU stops with the code; a real chip without a
 * debugger takes the fault handler). */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#define TINYCC_ML_REG(addr) (*(volatile uint32_t *)(addr))
#define TINYCC_ML_UART_STARTTX TINYCC_ML_REG(0x40002008u)
#define TINYCC_ML_UART_TXDRDY TINYCC_ML_REG(0x4000211Cu)
#define TINYCC_ML_UART_ENABLE TINYCC_ML_REG(0x40002500u)
#define TINYCC_ML_UART_PSELTXD TINYCC_ML_REG(0x4000250Cu)
#define TINYCC_ML_UART_TXD TINYCC_ML_REG(0x4000251Cu)
#define TINYCC_ML_UART_BAUDRATE TINYCC_ML_REG(0x40002524u)

#ifndef TINYCC_ML_UART_TX_PIN
#define TINYCC_ML_UART_TX_PIN 24u
#endif

extern uint32_t __bss_end;

int _write(int fd, const char *data, int length);
void *_sbrk(ptrdiff_t increment);
int _close(int fd);
int _fstat(int fd, struct stat *st);
int _isatty(int fd);
int _lseek(int fd, int offset, int whence);
int _read(int fd, char *data, int length);
void _exit(int code);
int _kill(int pid, int sig);
int _getpid(void);

static void tinycc_ml_uart_putc(char c)
{
    static int ready;
    if (!ready) {
        TINYCC_ML_UART_PSELTXD = TINYCC_ML_UART_TX_PIN;
        TINYCC_ML_UART_BAUDRATE = 0x01D7E000u; /* 115200 */
        TINYCC_ML_UART_ENABLE = 4u;
        TINYCC_ML_UART_STARTTX = 1u;
        ready = 1;
    }
    TINYCC_ML_UART_TXDRDY = 0u;
    TINYCC_ML_UART_TXD = (uint8_t)c;
    while (!TINYCC_ML_UART_TXDRDY) {
    }
}

int _write(int fd, const char *data, int length)
{
    if (fd != 1 && fd != 2) {
        errno = EBADF;
        return -1;
    }
    for (int i = 0; i < length; ++i)
        tinycc_ml_uart_putc(data[i]);
    return length;
}

void *_sbrk(ptrdiff_t increment)
{
    static char *heap_end;
    char *stack;
    if (heap_end == NULL)
        heap_end = (char *)&__bss_end;
    __asm__ __volatile__("mov %0, sp" : "=r"(stack));
    if (increment > stack - 256 - heap_end) {
        errno = ENOMEM;
        return (void *)-1;
    }
    char *previous = heap_end;
    heap_end += increment;
    return previous;
}

int _close(int fd)
{
    (void)fd;
    return -1;
}

int _fstat(int fd, struct stat *st)
{
    (void)fd;
    st->st_mode = S_IFCHR;
    return 0;
}

int _isatty(int fd)
{
    (void)fd;
    return 1;
}

int _lseek(int fd, int offset, int whence)
{
    (void)fd;
    (void)offset;
    (void)whence;
    return 0;
}

int _read(int fd, char *data, int length)
{
    (void)fd;
    (void)data;
    (void)length;
    return 0;
}

void _exit(int code)
{
    /* SYS_EXIT_EXTENDED (0x20) with ADP_Stopped_ApplicationExit passes the code on */
    uint32_t block[2] = {0x20026u, (uint32_t)code};
    register uint32_t r0 __asm__("r0") = 0x20;
    register uint32_t *r1 __asm__("r1") = block;
    __asm__ __volatile__("bkpt 0xAB" : "+r"(r0) : "r"(r1) : "memory");
    for (;;) {
    }
}

int _kill(int pid, int sig)
{
    (void)pid;
    (void)sig;
    errno = EINVAL;
    return -1;
}

int _getpid(void)
{
    return 1;
}
