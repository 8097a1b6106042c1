# CMake toolchain file: avr-gcc for the ATmega328P (Arduino Uno) at 16 MHz.
#   cmake -DCMAKE_TOOLCHAIN_FILE=$(tinycc-ml cmake-dir)/tinycc-ml-avr.cmake ...
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
