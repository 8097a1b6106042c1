# CMake toolchain file: avr-gcc for the ATmega328P (Arduino Uno) at 16 MHz.
#   cmake -DCMAKE_TOOLCHAIN_FILE=$(tinycc-ml cmake-dir)/tinycc-ml-avr.cmake ...
# tinycc_ml_add_firmware adds TINYCC_ML_UART_SOURCE (default: avr_uart.c from this folder: printf on USART0 at
# 115200 baud, set up before main; set the variable to "" or your own file first to use another).
set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR avr)
set(CMAKE_C_COMPILER avr-gcc)
set(CMAKE_CXX_COMPILER avr-g++)
set(CMAKE_ASM_COMPILER avr-gcc)
set(TINYCC_ML_MCU atmega328p CACHE STRING "avr-gcc -mmcu value")
set(CMAKE_C_FLAGS_INIT "-mmcu=${TINYCC_ML_MCU} -DF_CPU=16000000UL -Os -ffunction-sections -fdata-sections")
set(CMAKE_CXX_FLAGS_INIT "${CMAKE_C_FLAGS_INIT}")
set(CMAKE_EXE_LINKER_FLAGS_INIT "-mmcu=${TINYCC_ML_MCU} -Wl,--gc-sections")
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
if(NOT DEFINED TINYCC_ML_UART_SOURCE)
  set(TINYCC_ML_UART_SOURCE "${CMAKE_CURRENT_LIST_DIR}/avr_uart.c")
endif()
