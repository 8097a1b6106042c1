# CMake toolchain file: arm-none-eabi-gcc for a Cortex-M33 (MPS2 AN505; nRF53, STM32L5/U5), hard float.
#   cmake -DCMAKE_TOOLCHAIN_FILE=$(tinycc-ml cmake-dir)/tinycc-ml-cortex-m33.cmake ...
# tinycc_ml_add_firmware adds nothing here: executables need your part's start-up code (it must switch the
# FPU on before any float instruction) and linker script (TINYCC_ML_STARTUP_SOURCE, TINYCC_ML_LINKER_SCRIPT;
# the MPS2 AN505 start-up of `compile --project --target cortex-m33` is a starting point), and for printf a UART and newlib's system calls (TINYCC_ML_UART_SOURCE).
set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR arm)
set(CMAKE_C_COMPILER arm-none-eabi-gcc)
set(CMAKE_CXX_COMPILER arm-none-eabi-g++)
set(CMAKE_ASM_COMPILER arm-none-eabi-gcc)
set(CMAKE_C_FLAGS_INIT "-mcpu=cortex-m33 -mthumb -mfpu=fpv5-sp-d16 -mfloat-abi=hard -Os -ffunction-sections -fdata-sections -fno-tree-loop-distribute-patterns")
set(CMAKE_CXX_FLAGS_INIT "${CMAKE_C_FLAGS_INIT}")
set(CMAKE_EXE_LINKER_FLAGS_INIT "-mcpu=cortex-m33 -mthumb -mfpu=fpv5-sp-d16 -mfloat-abi=hard -nostartfiles -Wl,--gc-sections")
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
