# A minimal OpenCV package config for the image builds (docker/Dockerfile.cpu passes
# -DOpenCV_DIR=/opt/opencv-min). Debian and Ubuntu ship OpenCVConfig.cmake only in the
# libopencv-dev metapackage, which pulls in every OpenCV module (Qt, VTK, GDAL, ...: about 210
# more packages and 2 more minutes of apt on 2 cores). Convoy uses core, imgproc and imgcodecs,
# whose -dev packages hold the headers and the .so links; this file defines what OpenCV's own
# config defines for them: OpenCV_FOUND, OpenCV_VERSION, OpenCV_INCLUDE_DIRS, OpenCV_LIBS and the
# imported targets opencv_<module>.
set(_convoy_ocv_available core imgproc imgcodecs)
set(_convoy_ocv_wanted ${OpenCV_FIND_COMPONENTS})
if(NOT _convoy_ocv_wanted)
  set(_convoy_ocv_wanted ${_convoy_ocv_available})
endif()

set(OpenCV_FOUND TRUE)
find_path(OpenCV_INCLUDE_DIR opencv2/core.hpp PATH_SUFFIXES opencv4)
if(NOT OpenCV_INCLUDE_DIR)
  set(OpenCV_FOUND FALSE)
  set(OpenCV_NOT_FOUND_MESSAGE "opencv2/core.hpp not found (install libopencv-core-dev)")
  return()
endif()

file(STRINGS "${OpenCV_INCLUDE_DIR}/opencv2/core/version.hpp" _convoy_ocv_v
     REGEX "^#define CV_VERSION_(MAJOR|MINOR|REVISION) +[0-9]+")
foreach(_part MAJOR MINOR REVISION)
  string(REGEX REPLACE ".*CV_VERSION_${_part} +([0-9]+).*" "\\1" OpenCV_VERSION_${_part} "${_convoy_ocv_v}")
endforeach()
set(OpenCV_VERSION "${OpenCV_VERSION_MAJOR}.${OpenCV_VERSION_MINOR}.${OpenCV_VERSION_REVISION}")
set(OpenCV_INCLUDE_DIRS "${OpenCV_INCLUDE_DIR}")
set(OpenCV_LIBS)

foreach(_m IN LISTS _convoy_ocv_wanted)
  string(REGEX REPLACE "^opencv_" "" _m "${_m}")
  find_library(OpenCV_${_m}_LIBRARY opencv_${_m})
  if(NOT _m IN_LIST _convoy_ocv_available OR NOT OpenCV_${_m}_LIBRARY)
    set(OpenCV_FOUND FALSE)
    set(OpenCV_NOT_FOUND_MESSAGE "OpenCV module ${_m} not found (install libopencv-${_m}-dev)")
    return()
  endif()
  if(NOT TARGET opencv_${_m})
    add_library(opencv_${_m} SHARED IMPORTED)
    set_target_properties(opencv_${_m} PROPERTIES
        IMPORTED_LOCATION "${OpenCV_${_m}_LIBRARY}"
        INTERFACE_INCLUDE_DIRECTORIES "${OpenCV_INCLUDE_DIR}")
  endif()
  list(APPEND OpenCV_LIBS opencv_${_m})
endforeach()
