# TinyccML.cmake: compile tinycc-ml models at build time into static libraries.
#
#   execute_process(COMMAND tinycc-ml cmake-dir OUTPUT_VARIABLE dir OUTPUT_STRIP_TRAILING_WHITESPACE)
#   list(APPEND CMAKE_MODULE_PATH "${dir}")
#   include(TinyccML)
#   tinycc_ml_add_model(kws MODEL models/kws.npz
#                       [TARGET host|avr|cortex-m0|...]    default host (`tinycc-ml targets`)
#                       [PRECISION float|int16|int8]       default: int16 with CALIBRATION, else float
#                       [CALIBRATION data/train.npz]       rows that choose fixed-point scales
#                       [NAME kws])                        C prefix and file names; default: <lib>
#   target_link_libraries(app PRIVATE kws)                 # kws.h is on the include path
#
#   tinycc_ml_add_firmware(app main.c ...)                  add_executable + the chip's start-up file
#                                                          and linker script for cross builds
#                                                          (TINYCC_ML_STARTUP_SOURCE, TINYCC_ML_LINKER_SCRIPT:
#                                                          set by tinycc-ml-cortex-m0.cmake; none on the host)
#                                                          and printf on the UART (TINYCC_ML_UART_SOURCE:
#                                                          set by tinycc-ml-avr.cmake and tinycc-ml-cortex-m0.cmake)
#
# The model is compiled when the build runs (not at configure time). It is compiled again when the
# model (any file of an EdgeML directory), the calibration file or the options change, and not
# otherwise. The manifest <NAME>.json is the step's stamp (rewritten on every run); regenerated
# .h/.c files whose content is unchanged keep their time stamps, so with Ninja nothing downstream
# rebuilds (Make generators touch them when the step runs, so their dependents recompile). TINYCC_ML_COMMAND (cache) is the command that runs tinycc-ml; it defaults to
# the tinycc-ml program on PATH, else `python3 -m tinycc_ml`.
#
# Cross builds: tinycc-ml-avr.cmake and tinycc-ml-cortex-m0.cmake in this folder are toolchain
# files (-DCMAKE_TOOLCHAIN_FILE=...) for avr-gcc (ATmega328P) and arm-none-eabi-gcc (Cortex-M0);
# tinycc-ml-cortex-m4.cmake and tinycc-ml-cortex-m33.cmake for the hard-float Cortex-M4F and M33.

include_guard(GLOBAL)

if(CMAKE_VERSION VERSION_LESS 3.20)
  message(FATAL_ERROR "TinyccML.cmake needs CMake 3.20 or newer (DEPFILE with every generator); "
                      "this is ${CMAKE_VERSION}")
endif()

if(NOT TINYCC_ML_COMMAND)
  find_program(TINYCC_ML_EXECUTABLE tinycc-ml)
  if(TINYCC_ML_EXECUTABLE)
    set(_tinycc_ml_default "${TINYCC_ML_EXECUTABLE}")
  else()
    find_package(Python3 COMPONENTS Interpreter REQUIRED)
    set(_tinycc_ml_default "${Python3_EXECUTABLE};-m;tinycc_ml")
  endif()
  set(TINYCC_ML_COMMAND "${_tinycc_ml_default}" CACHE STRING "Command (a CMake list) that runs tinycc-ml")
endif()

# A microcontroller TARGET needs the matching cross compiler: said at configure time, not as a missing
# <avr/io.h> or an unknown -mmcu when the build runs. The host target's C is portable: any compiler.
function(_tinycc_ml_check_compiler where target)
  if(target STREQUAL "host" OR NOT CMAKE_C_COMPILER)
    return()
  endif()
  get_filename_component(_cc "${CMAKE_C_COMPILER}" NAME)
  if(target MATCHES "^avr")
    set(_want avr)
    set(_toolchain tinycc-ml-avr.cmake)
  elseif(target MATCHES "^cortex-")
    set(_want arm)
    set(_toolchain tinycc-ml-${target}.cmake)
  else()
    return()  # a plug-in target: its own toolchain, unknown here
  endif()
  string(TOLOWER "${CMAKE_SYSTEM_PROCESSOR}" _processor)
  if(NOT _cc MATCHES "${_want}" AND NOT _processor MATCHES "^${_want}")
    message(FATAL_ERROR "${where}: TARGET ${target} needs its cross compiler, but this build compiles C with "
                        "${CMAKE_C_COMPILER} for ${CMAKE_SYSTEM_PROCESSOR}; configure with "
                        "-DCMAKE_TOOLCHAIN_FILE=${CMAKE_CURRENT_FUNCTION_LIST_DIR}/${_toolchain}")
  endif()
endfunction()

# add_executable(exe sources...), plus the chip's start-up file and linker script when the toolchain file
# names them (TINYCC_ML_STARTUP_SOURCE, TINYCC_ML_LINKER_SCRIPT): a Cortex-M0 build links without them with
# "cannot find entry symbol _start".
function(tinycc_ml_add_firmware exe)
  add_executable(${exe} ${ARGN})
  if(TINYCC_ML_STARTUP_SOURCE)
    target_sources(${exe} PRIVATE "${TINYCC_ML_STARTUP_SOURCE}")
  endif()
  if(TINYCC_ML_UART_SOURCE)
    target_sources(${exe} PRIVATE "${TINYCC_ML_UART_SOURCE}")
  endif()
  if(TINYCC_ML_LINKER_SCRIPT)
    target_link_options(${exe} PRIVATE "-T${TINYCC_ML_LINKER_SCRIPT}")
    set_property(TARGET ${exe} APPEND PROPERTY LINK_DEPENDS "${TINYCC_ML_LINKER_SCRIPT}")
  endif()
endfunction()

function(tinycc_ml_add_model lib)
  set(_one MODEL TARGET PRECISION CALIBRATION NAME)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "" "${_one}" "")
  set(_where "tinycc_ml_add_model(${lib})")
  if(ARG_UNPARSED_ARGUMENTS)
    list(JOIN _one ", " _known)
    message(FATAL_ERROR "${_where}: unknown argument(s) ${ARG_UNPARSED_ARGUMENTS}; known: ${_known}")
  endif()
  if(ARG_KEYWORDS_MISSING_VALUES)
    message(FATAL_ERROR "${_where}: ${ARG_KEYWORDS_MISSING_VALUES} needs a value")
  endif()
  if(NOT ARG_MODEL)
    message(FATAL_ERROR "${_where}: MODEL <path> is required")
  endif()
  if(ARG_MODEL MATCHES ";" OR ARG_CALIBRATION MATCHES ";")
    message(FATAL_ERROR "${_where}: MODEL ${ARG_MODEL} / CALIBRATION ${ARG_CALIBRATION}: a path with ';' "
                        "cannot be passed through CMake's lists; rename the file")
  endif()
  get_filename_component(_model "${ARG_MODEL}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  if(NOT EXISTS "${_model}")
    message(FATAL_ERROR "${_where}: MODEL ${_model} does not exist")
  endif()
  if(IS_DIRECTORY "${_model}")  # an EdgeML directory: every file in it is an input
    file(GLOB _model_files LIST_DIRECTORIES false "${_model}/*")
  else()
    set(_model_files "${_model}")
  endif()
  if(NOT ARG_TARGET)
    set(ARG_TARGET host)
  endif()
  _tinycc_ml_check_compiler("${_where}" "${ARG_TARGET}")
  if(NOT ARG_NAME)
    string(MAKE_C_IDENTIFIER "${lib}" ARG_NAME)
  endif()
  if(NOT ARG_NAME MATCHES "^[A-Za-z_][A-Za-z0-9_]*$")
    message(FATAL_ERROR "${_where}: NAME ${ARG_NAME} is not a C identifier")
  endif()
  # the names tinycc-ml refuses (C_KEYWORDS, SYSTEM_HEADERS in backends/c_emitter.py), refused here at
  # configure time rather than when the build runs
  set(_c_keywords auto break case char const continue default do double else enum extern float for goto if
      inline int long register restrict return short signed sizeof static struct switch typedef union unsigned
      void volatile while _Bool _Complex _Imaginary)
  set(_system_headers assert complex ctype errno fenv float inttypes iso646 limits locale math setjmp signal
      stdalign stdarg stdatomic stdbit stdbool stdckdint stddef stdint stdio stdlib stdnoreturn string tgmath
      threads time uchar wchar wctype unistd strings alloca malloc pthread fcntl arduino)
  string(TOLOWER "${ARG_NAME}" _lower_name)
  string(LENGTH "${ARG_NAME}" _name_length)
  if(ARG_NAME IN_LIST _c_keywords)
    message(FATAL_ERROR "${_where}: NAME ${ARG_NAME} is a C keyword")
  elseif(_lower_name IN_LIST _system_headers)
    message(FATAL_ERROR "${_where}: NAME ${ARG_NAME} would write ${ARG_NAME}.h, which shadows the standard "
                        "header <${_lower_name}.h>; choose another NAME")
  elseif(_name_length GREATER 40)
    message(FATAL_ERROR "${_where}: NAME ${ARG_NAME} is longer than 40 characters")
  endif()
  # characters the generated build cannot carry: '#' starts a comment in Make and in depfiles, ';'
  # splits a CMake list (the command line and the dependencies would name two files)
  foreach(_path IN ITEMS "${CMAKE_CURRENT_BINARY_DIR}")
    if(_path MATCHES "#")
      message(FATAL_ERROR "${_where}: the binary folder ${_path} contains '#', which Make and depfiles read as "
                          "a comment; use a build folder without '#'")
    endif()
  endforeach()

  set(_out "${CMAKE_CURRENT_BINARY_DIR}/tinycc_ml/${lib}")
  set(_header "${_out}/${ARG_NAME}.h")
  set(_source "${_out}/${ARG_NAME}.c")
  set(_manifest "${_out}/${ARG_NAME}.json")
  set(_depfile "${_out}/${ARG_NAME}.d")
  set(_args compile "${_model}" --target "${ARG_TARGET}" --name "${ARG_NAME}" -o "${_out}")
  set(_depends ${_model_files})
  if(ARG_PRECISION)
    list(APPEND _args --precision "${ARG_PRECISION}")
  endif()
  if(ARG_CALIBRATION)
    get_filename_component(_calibration "${ARG_CALIBRATION}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    if(NOT EXISTS "${_calibration}")
      message(FATAL_ERROR "${_where}: CALIBRATION ${_calibration} does not exist")
    endif()
    list(APPEND _args --calibration "${_calibration}")
    list(APPEND _depends "${_calibration}")
  endif()

  # The options as a file the step depends on: file(CONFIGURE) rewrites it only when they change,
  # which is what makes Make (which does not compare command lines, unlike Ninja) rerun the step.
  file(MAKE_DIRECTORY "${_out}")
  set(_options "${TINYCC_ML_COMMAND};${_args}")
  file(CONFIGURE OUTPUT "${_out}/${ARG_NAME}.options" CONTENT "${_options}\n" @ONLY)

  add_custom_command(
    OUTPUT "${_manifest}" "${_header}" "${_source}"
    COMMAND ${TINYCC_ML_COMMAND} -q ${_args} --depfile "${_depfile}" --manifest "${_manifest}"
    DEPENDS ${_depends} "${_out}/${ARG_NAME}.options"
    DEPFILE "${_depfile}"
    COMMENT "tinycc-ml: compiling ${ARG_MODEL} for ${ARG_TARGET} (${lib})"
    VERBATIM)
  add_library(${lib} STATIC "${_source}" "${_header}")
  target_include_directories(${lib} PUBLIC "${_out}")
  if(NOT MSVC)
    target_link_libraries(${lib} PUBLIC m)  # float builds call expf/tanhf
  endif()
  set_target_properties(${lib} PROPERTIES TINYCC_ML_HEADER "${_header}" TINYCC_ML_MANIFEST "${_manifest}")
endfunction()
