#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc,char**argv){
  size_t mb=argc>1?atol(argv[1]):19; size_t n=mb*1024*1024/4;  // floats
  float*buf=aligned_alloc(64,n*4*8); memset(buf,1,n*4*8);   // 8 distinct regions, cycled so nothing stays cached
  float*src=aligned_alloc(64,n*4*8); memset(src,2,n*4*8);
  for(int mode=0;mode<5;++mode){
    double best=1e9;
    for(int rep=0;rep<40;++rep){
      float*b=buf+(rep%8)*n; float*s=src+(rep%8)*n;
      double t0=now();
      #pragma omp parallel
      {
        int t=omp_get_thread_num(),T=omp_get_num_threads(); size_t lo=n*t/T/16*16, hi=n*(t+1)/T/16*16;
        __m512 v=_mm512_set1_ps(1.5f);
        if(mode==0) for(size_t i=lo;i<hi;i+=16) _mm512_stream_ps(b+i,v);
        else if(mode==1) for(size_t i=lo;i<hi;i+=16) _mm512_store_ps(b+i,v);
        else if(mode==2) for(size_t i=lo;i<hi;i+=16) _mm512_stream_ps(b+i,_mm512_load_ps(s+i));
        else if(mode==3) for(size_t i=lo;i<hi;i+=16) { __asm__ volatile("clzero" :: "a"(b+i) : "memory"); _mm512_store_ps(b+i,v); }
        else for(size_t i=lo;i<hi;i+=16) { __asm__ volatile("clzero" :: "a"(b+i) : "memory"); _mm512_store_ps(b+i,_mm512_load_ps(s+i)); }
      }
      _mm_sfence();
      double dt=now()-t0; if(dt<best)best=dt;
    }
    double bytes=(mode==2||mode==4?2.0:1.0)*n*4;
    printf("%s: %.1f GB/s (%zu MB in %.3f ms)\n",mode==0?"NT write":mode==1?"plain write":mode==2?"NT copy (read+write)":mode==3?"clzero+store":"clzero copy",bytes/best/1e9,mb,best*1e3);
  }
  return 0;
}
