# CMake toolchain file: arm-none-eabi-gcc for a Cortex-M0 (nRF51822 / BBC micro:bit).
#   cmake -DCMAKE_TOOLCHAIN_FILE=$(tinycc-ml cmake-dir)/tinycc-ml-cortex-m0.cmake ...
# Executables need start-up code and a linker script: tinycc_ml_add_firmware(app main.c) (TinyccML.cmake)
# adds the nRF51822's from this folder, TINYCC_ML_STARTUP_SOURCE and TINYCC_ML_LINKER_SCRIPT, and
# TINYCC_ML_UART_SOURCE (nrf51_uart.c: printf on the UART, P0.24 at 115200 baud, and newlib's system calls);
# set them before including TinyccML to use your own ("" for none).
set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR arm)
set(CMAKE_C_COMPILER arm-none-eabi-gcc)
set(CMAKE_CXX_COMPILER arm-none-eabi-g++)
set(CMAKE_ASM_COMPILER arm-none-eabi-gcc)
set(CMAKE_C_FLAGS_INIT "-mcpu=cortex-m0 -mthumb -Os -ffunction-sections -fdata-sections -fno-tree-loop-distribute-patterns")
set(CMAKE_CXX_FLAGS_INIT "${CMAKE_C_FLAGS_INIT}")
set(CMAKE_EXE_LINKER_FLAGS_INIT "-mcpu=cortex-m0 -mthumb -nostartfiles -Wl,--gc-sections")
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
if(NOT DEFINED TINYCC_ML_STARTUP_SOURCE)
  set(TINYCC_ML_STARTUP_SOURCE "${CMAKE_CURRENT_LIST_DIR}/nrf51_startup.c")
endif()
if(NOT DEFINED TINYCC_ML_LINKER_SCRIPT)
  set(TINYCC_ML_LINKER_SCRIPT "${CMAKE_CURRENT_LIST_DIR}/nrf51.ld")
endif()
if(NOT DEFINED TINYCC_ML_UART_SOURCE)
  set(TINYCC_ML_UART_SOURCE "${CMAKE_CURRENT_LIST_DIR}/nrf51_uart.c")
endif()
